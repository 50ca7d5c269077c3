// What the redirect needs to know about an operator's schema, computed once per operator.
#pragma once

#include <ATen/core/function_schema.h>

#include <cstdint>
#include <string>
#include <vector>

namespace vnpu {

// Operators the Ascend cube unit computes (their float32 operands can be rounded, see
// PrecisionEmulation.h).
enum class CubeClass { None, Matmul, Convolution };

struct OpFacts {
  std::string name;  // "aten::add.Tensor", for error messages
  size_t num_args = 0;
  size_t num_returns = 0;
  std::vector<uint8_t> written;               // argument i is Tensor(a!) or Tensor(a!)[]
  std::vector<uint8_t> optional_tensor_list;  // argument i is Tensor?[]
  std::vector<int> generator_args;
  std::vector<std::string> arg_names;
  int layout_arg = -1;
  bool writes_arguments = false;
  // Operators PyTorch allows to take tensors on several devices (copies, indexing with CPU indices).
  bool mixes_devices = false;
  // Advanced indexing (index, index_put_...): indices must be on the CPU or on the indexed tensor's device.
  bool indexes_by_tensors = false;
  // The host reads its result from device memory (aten/HostSync.h): the card waits for the stream.
  bool reads_device_memory_on_host = false;
  // On the active operator-support profile's torch_npu, this operator runs through the CPU fallback.
  bool cpu_fallback = false;
  std::string fallback_name;  // the name torch_npu's CPU fallback reports it under (CpuFallback.h)
  CubeClass cube_class = CubeClass::None;
  std::vector<int> cube_args;  // the operands the cube multiplies
};

OpFacts make_op_facts(const c10::FunctionSchema& schema);
// Cached facts for operators reached through the boxed fallback.
const OpFacts& op_facts_of(const c10::FunctionSchema& schema);

}  // namespace vnpu
