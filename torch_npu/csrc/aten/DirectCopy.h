// Copies between npu tensors of one device, run on the tensors themselves (DirectCopy.cpp).
#pragma once

#include <ATen/core/Tensor.h>

namespace vnpu {

// self.copy_(src) for two npu tensors of the current device, with the CPU's element-wise copy kernel, as the
// CPU copies two CPU tensors. False (nothing written) when the call takes the redirect instead.
bool copy_between_npu_tensors(at::Tensor& self, const at::Tensor& src, bool non_blocking);

}  // namespace vnpu
