// The operators with a typed (unboxed) redirect kernel (UnboxedRedirect.h), and the kernels some
// operators need around the redirect.
#include "aten/UnboxedRedirect.h"

#include "aten/DirectAdmission.h"
#include "aten/DirectCopy.h"
#include "runtime/HostMemory.h"

#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/convolution_ops.h>

#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/library.h>

// The operators that dominate training and inference steps, measured by counting the operators an
// MLP/Adam, ConvNet/SGD, transformer/AdamW, AMP bf16 and Llama-style train + decode step reach the
// npu kernel with (the rest take the boxed redirect). The element-wise ones of those steps run on the npu tensors
// themselves and come here when they cannot (StructuredKernels.cpp), as the optimizers' tensor-list operators do
// (ForeachKernels.cpp).
#define VNPU_UNBOXED_OPS(_)                                                                                         \
  /* element-wise arithmetic, comparisons, selection */                                                             \
  _(rsub_Scalar, "rsub.Scalar")                                                                                     \
  _(mul__Scalar, "mul_.Scalar")                                                                                     \
  _(maximum, "maximum")                                                                                             \
  _(minimum, "minimum")                                                                                             \
  _(abs, "abs")                                                                                                     \
  _(pow_Scalar, "pow.Scalar")                                                                                       \
  _(eq_Scalar, "eq.Scalar")                                                                                         \
  _(eq_Tensor, "eq.Tensor")                                                                                         \
  _(ne_Scalar, "ne.Scalar")                                                                                         \
  _(gt_Scalar, "gt.Scalar")                                                                                         \
  _(lt_Scalar, "lt.Scalar")                                                                                         \
  _(where_self, "where.self")                                                                                       \
  _(masked_fill_Scalar, "masked_fill.Scalar")                                                                       \
  _(masked_fill__Scalar, "masked_fill_.Scalar")                                                                     \
  _(clamp, "clamp")                                                                                                 \
  _(triu, "triu")                                                                                                   \
  _(tril, "tril")                                                                                                   \
  /* activations and their backwards */                                                                             \
  _(gelu, "gelu")                                                                                                   \
  _(gelu_backward, "gelu_backward")                                                                                 \
  /* reductions, softmax, losses */                                                                                 \
  _(argmax, "argmax")                                                                                               \
  _(topk, "topk")                                                                                                   \
  /* matmuls, convolutions, normalisation, pooling, attention */                                                    \
  _(bmm, "bmm")                                                                                                     \
  _(convolution_backward, "convolution_backward")                                                                   \
  _(native_layer_norm_backward, "native_layer_norm_backward")                                                       \
  _(native_batch_norm, "native_batch_norm")                                                                         \
  _(native_batch_norm_backward, "native_batch_norm_backward")                                                       \
  _(max_pool2d_with_indices, "max_pool2d_with_indices")                                                             \
  _(max_pool2d_with_indices_backward, "max_pool2d_with_indices_backward")                                           \
  _(_scaled_dot_product_flash_attention_for_cpu, "_scaled_dot_product_flash_attention_for_cpu")                     \
  _(_scaled_dot_product_flash_attention_for_cpu_backward, "_scaled_dot_product_flash_attention_for_cpu_backward")   \
  /* indexing, embedding, reshapes that copy */                                                                     \
  _(embedding, "embedding")                                                                                         \
  _(embedding_dense_backward, "embedding_dense_backward")                                                           \
  _(index_select, "index_select")                                                                                   \
  _(gather, "gather")                                                                                               \
  _(slice_backward, "slice_backward")                                                                               \
  /* creation, filling, copies, host reads */                                                                       \
  _(full, "full")                                                                                                   \
  _(arange_start_step, "arange.start_step")                                                                         \
  /* tensor lists: gradient clipping's norms, scaling (the optimizers' other list operators: ForeachKernels.cpp) */ \
  _(_foreach_norm_Scalar, "_foreach_norm.Scalar")                                                                   \
  _(_foreach_mul__Scalar, "_foreach_mul_.Scalar")

namespace vnpu {
namespace {

// Conversions follow torch_npu's _to_copy: a dtype-only conversion of an npu tensor to float64 gives
// float32 (the card has no double kernels; torch_npu warns once), and a non-blocking copy to the host
// lands in pinned memory, as a device-to-host DMA does.
at::Tensor to_copy(const at::Tensor& self, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                   std::optional<at::Device> device, std::optional<bool> pin_memory, bool non_blocking,
                   std::optional<at::MemoryFormat> memory_format) {
  const bool from_npu = self.device().type() == c10::DeviceType::PrivateUse1;
  if (from_npu && !device.has_value() && dtype == at::ScalarType::Double && self.scalar_type() != at::kDouble) {
    TORCH_WARN_ONCE("Device do not support double dtype now, dtype cast replace with float.");
    dtype = at::ScalarType::Float;
  }
  if (from_npu && device.has_value() && device->is_cpu() && !plan_mode()) {
    const size_t bytes = static_cast<size_t>(self.numel()) * c10::elementSize(dtype.value_or(self.scalar_type()));
    std::string note;
    TORCH_CHECK(host_can_hold_copy(bytes, note), "DefaultCPUAllocator: can't allocate memory: you tried to allocate ",
                bytes, " bytes.", note);
  }
  // Staying on the device, it is the CPU's composite on the npu tensors (an empty tensor and copy_).
  at::Tensor result = Composite<at::_ops::_to_copy, &at::native::_to_copy, StaysOnItsDevice>::call(
      self, dtype, layout, device, pin_memory, non_blocking, memory_format);
  if (!non_blocking && device.has_value() && device->type() != self.device().type()) {
    host_waits_for_stream(from_npu ? self.device().index() : result.device().index());
  }
  if (from_npu && non_blocking && result.device().is_cpu() && result.layout() == c10::kStrided && !result.is_pinned()) {
    at::Tensor pinned = at::empty_strided(result.sizes(), result.strides(), result.options().pinned_memory(true));
    pinned.copy_(result);
    return pinned;
  }
  return result;
}

// A blocking copy between host and npu memory and reading a scalar back make the host wait for the stream,
// as torch_npu does after the DMA (aten/HostSync.h); one comparison when a copy stays on one side.
at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  if (copy_between_npu_tensors(self, src, non_blocking)) {
    return self;
  }
  at::Tensor& result = Unboxed<at::_ops::copy_>::call(self, src, non_blocking);
  if (!non_blocking && self.device().type() != src.device().type()) {
    host_waits_for_stream(self.device().type() == c10::DeviceType::PrivateUse1 ? self.device().index()
                                                                               : src.device().index());
  }
  return result;
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  at::Scalar value = Unboxed<at::_ops::_local_scalar_dense>::call(self);
  host_waits_for_stream(self.device().index());
  return value;
}

// torch_npu's clone allocates its result in the source's format, so a copy of a whole NZ or NC1HWC0
// tensor (Parameter deepcopy, contiguous()) keeps the format and its padded storage size.
at::Tensor clone(const at::Tensor& self, std::optional<at::MemoryFormat> memory_format) {
  if (self.has_storage() && !self.is_view() && self.storage_offset() == 0 && self.is_contiguous() &&
      memory_format.value_or(c10::MemoryFormat::Preserve) != c10::MemoryFormat::ChannelsLast &&
      memory_format.value_or(c10::MemoryFormat::Preserve) != c10::MemoryFormat::ChannelsLast3d) {
    const auto [format, storage_numel] = storage_format(self.storage().data_ptr());
    if (format >= 0 && static_cast<size_t>(storage_numel) * self.itemsize() == self.storage().nbytes()) {
      at::Tensor storage_owner = at::empty({storage_numel}, self.options());
      at::Tensor result = at::empty({0}, self.options());
      result.set_(storage_owner.storage(), 0, self.sizes(), self.strides());
      result.copy_(self);
      const auto base = storage_base(self.storage().data_ptr());
      set_storage_format(result.storage().data_ptr(), format, storage_numel,
                         base ? *base : StorageBase{self.sizes().vec(), self.scalar_type()});
      return result;
    }
  }
  return Composite<at::_ops::clone, &at::native::clone>::call(self, memory_format);
}

// torch.jit.trace (and with it the TorchScript ONNX exporter) leaves aten::convolution unrecorded and records the
// aten::_convolution its kernel calls through the dispatcher. While a trace records, npu's convolution runs the
// composite found in the CPU slot on the npu tensors (the recorded node then has the npu values), as the recurrent
// layers do (HostRecurrent.cpp); otherwise it is the typed redirect.
at::Tensor convolution(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                       c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
                       bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups) {
  if (C10_UNLIKELY(torch::jit::tracer::isTracing())) {
    return at::_ops::convolution::redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), input, weight, bias, stride,
                                             padding, dilation, transposed, output_padding, std::move(groups));
  }
  return Unboxed<at::_ops::convolution>::call(input, weight, bias, stride, padding, dilation, transposed,
                                              output_padding, std::move(groups));
}

}  // namespace
}  // namespace vnpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define VNPU_REGISTER_UNBOXED(op, name) m.impl(name, TORCH_FN((&vnpu::Unboxed<at::_ops::op>::call)));
  VNPU_UNBOXED_OPS(VNPU_REGISTER_UNBOXED)
#undef VNPU_REGISTER_UNBOXED
  m.impl("convolution", TORCH_FN(vnpu::convolution));
  m.impl("_to_copy", TORCH_FN(vnpu::to_copy));
  m.impl("clone", TORCH_FN(vnpu::clone));
  m.impl("copy_", TORCH_FN(vnpu::copy_));
  m.impl("_local_scalar_dense", TORCH_FN(vnpu::local_scalar_dense));
}
