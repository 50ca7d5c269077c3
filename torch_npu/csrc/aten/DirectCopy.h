// Copies and conversions between npu tensors of one device, run on the tensors themselves (DirectCopy.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace vnpu {

// self.copy_(src) for two npu tensors of the current device, with the CPU's element-wise copy kernel, as the
// CPU copies two CPU tensors. False (nothing written) when the call takes the redirect instead.
bool copy_between_npu_tensors(at::Tensor& self, const at::Tensor& src, bool non_blocking);

// _to_copy of an npu tensor whose result stays on its device: the composite the CPU runs, with its copy
// above. nullopt when the call takes the redirect instead.
std::optional<at::Tensor> to_copy_on_its_device(const at::Tensor& self, std::optional<at::ScalarType> dtype,
                                                std::optional<at::Layout> layout, std::optional<at::Device> device,
                                                std::optional<bool> pin_memory, bool non_blocking,
                                                std::optional<at::MemoryFormat> memory_format);

// clone of an npu tensor: the composite the CPU runs (an empty npu tensor of the same geometry, and the copy
// above). nullopt when the call takes the redirect instead.
std::optional<at::Tensor> clone_on_its_device(const at::Tensor& self, std::optional<at::MemoryFormat> memory_format);

}  // namespace vnpu
