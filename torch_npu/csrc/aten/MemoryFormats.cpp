// The memory formats an npu tensor can be made contiguous in: torch_npu's contiguous operator
// supports the contiguous format only (channels_last layouts are the card's internal formats' job,
// see npu_format_cast), and raises with ERR01007 for the others.
#include "runtime/ErrorCode.h"

#include <ATen/ops/clone.h>
#include <torch/library.h>

namespace vnpu {
namespace {

at::Tensor contiguous(const at::Tensor& self, c10::MemoryFormat memory_format) {
  TORCH_CHECK(memory_format != c10::MemoryFormat::Preserve,
              "preserve memory format is unsupported by the contiguous operator");
  TORCH_CHECK(memory_format == c10::MemoryFormat::Contiguous,
              "NPU contiguous operator only supported contiguous memory format.", ops_not_supported_error());
  if (self.is_contiguous()) {
    return self;
  }
  return self.clone(c10::MemoryFormat::Contiguous);
}

}  // namespace
}  // namespace vnpu

// Registered for the autograd key too, so the kernel replaces PyTorch's composite one with or
// without autograd; the clone records its own gradient.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("contiguous", TORCH_FN(vnpu::contiguous));
}
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("contiguous", TORCH_FN(vnpu::contiguous));
}
