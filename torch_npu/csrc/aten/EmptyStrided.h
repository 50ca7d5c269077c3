#pragma once
// An npu tensor of the current device from the caching allocator, as aten::empty_strided makes it but without
// the dispatcher: torch_npu._C._empty_strided_npu, the allocation fast path of compiled code.
#include <ATen/core/Tensor.h>

namespace vnpu {

at::Tensor empty_strided_npu(c10::IntArrayRef size, c10::IntArrayRef stride, c10::ScalarType dtype);

}  // namespace vnpu
