// The error for a CPU tensor (not a 0-dim number) among an operator's npu tensors, in torch_npu's words. torch_npu's
// generated wrappers check devices only where PyTorch's native_functions.yaml asks for it: there the error is
// PyTorch's common-device text; operators marked `device_check: NoCheck` (the TensorIterator ones: add, mul, ...)
// pass the CPU tensor on to the kernel, which refuses it with "Expected all tensors to be on the same device.
// Expected NPU tensor, ...". Which text applies is decided on the error path only, by torch_npu/_device_checks.py.
#pragma once

#include <functional>
#include <string>

namespace vnpu {

// message(op) -> torch_npu's text for `op` ("aten::add.Tensor"), or "" for PyTorch's common-device text.
using CpuOperandMessage = std::function<std::string(const std::string&)>;

void set_cpu_operand_message(CpuOperandMessage message);
std::string cpu_operand_message(const std::string& op);

}  // namespace vnpu
