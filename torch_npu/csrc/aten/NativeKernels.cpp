// Kernels the npu backend owns instead of redirecting: tensor creation (the npu allocator),
// metadata-only views, copies between devices, storage changes, ZeroTensors, and dropout (whose
// CPU kernel would draw from the CPU generator).
#include "aten/DispatchKeys.h"
#include "aten/EmptyStrided.h"
#include "aten/TensorMapping.h"
#include "plan/PlanMode.h"
#include "runtime/CachingAllocator.h"
#include "runtime/Device.h"
#include "runtime/Stream.h"

#include <ATen/EmptyTensor.h>
#include <ATen/Functions.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/resize_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

namespace vnpu {
namespace {

c10::DeviceIndex target_index(std::optional<c10::Device> device) {
  const auto index = device.has_value() && device->has_index() ? device->index() : current_device();
  check_device_index(index);
  if (C10_UNLIKELY(g_stopped_devices.load(std::memory_order_relaxed) != 0)) {
    check_device_running(index);
  }
  return index;
}

void check_creation(std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK_NOT_IMPLEMENTED(c10::layout_or_default(layout) == c10::kStrided, "Cannot create a ",
                              layout_name(c10::layout_or_default(layout)),
                              " tensor: sparse, quantized and nested tensors are not supported on npu (only "
                              "strided, dense tensors are)");
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned");
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  check_creation(layout, pin_memory);
  c10::DeviceGuard guard(c10::Device(kNpu, target_index(device)));
  const PlanFactoryScope plan("aten::empty");
  return at::detail::empty_generic(size, npu_allocator(), kNpuKeys, c10::dtype_or_default(dtype), memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  check_creation(layout, pin_memory);
  c10::DeviceGuard guard(c10::Device(kNpu, target_index(device)));
  const PlanFactoryScope plan("aten::empty_strided");
  return at::detail::empty_strided_generic(size, stride, npu_allocator(), kNpuKeys, c10::dtype_or_default(dtype));
}

at::Tensor efficient_zero_tensor(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                                 std::optional<c10::Layout> /*layout*/, std::optional<c10::Device> device,
                                 std::optional<bool> /*pin_memory*/) {
  return make_zero_tensor(size, c10::dtype_or_default(dtype), c10::Device(kNpu, target_index(device)));
}

// Same arithmetic as the CPU kernel, but the mask comes from bernoulli_ on npu, which draws from
// the npu generator: equal seeds give equal results on npu and on cpu.
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  if (input.numel() == 0) {
    return {input, at::empty_like(input)};
  }
  if (!train.has_value() || *train) {
    const double keep = 1. - p;
    const double scale = keep == 0 ? 0. : 1. / keep;
    at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool));
    mask.bernoulli_(keep);
    return {input.mul(mask).mul_(scale), mask};
  }
  return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
}

at::Tensor as_cpu_if_npu(const at::Tensor& t) {
  return t.device().type() == kNpu ? make_cpu_alias(t, /*owning=*/false) : t;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  if (C10_UNLIKELY(plan_mode())) {
    return plan_copy(self, dst, non_blocking);
  }
  as_cpu_if_npu(dst).copy_(as_cpu_if_npu(self), non_blocking);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) {
    c10::DeviceGuard guard(dst.device());
    at::native::resize_(dst, self.sizes(), std::nullopt);
  }
  return copy_from(self, dst, false);
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                      std::optional<c10::SymInt> storage_offset) {
  return at::native::as_strided_tensorimpl(
      self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride),
      storage_offset.has_value() ? std::optional<int64_t>(storage_offset->expect_int()) : std::nullopt);
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride));
}

const at::Tensor& resize_(const at::Tensor& self, c10::SymIntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  c10::DeviceGuard guard(self.device());  // growth allocates on the tensor's device
  return at::native::resize_(self, C10_AS_INTARRAYREF_SLOW(size), memory_format);
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source) {
  c10::DeviceGuard guard(self.device());
  return at::native::set_(self, source);
}

at::Tensor& set_storage_offset(at::Tensor& self, c10::Storage source, c10::SymInt offset, c10::SymIntArrayRef size,
                               c10::SymIntArrayRef stride) {
  c10::DeviceGuard guard(self.device());
  return at::native::set_storage_cpu_(self, source, offset.expect_int(), C10_AS_INTARRAYREF_SLOW(size),
                                      C10_AS_INTARRAYREF_SLOW(stride));
}

at::Tensor& set_tensor(at::Tensor& self, const at::Tensor& source) {
  return at::native::set_tensor_(self, source);
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, npu_allocator(), /*resizable=*/true);
  return set_storage_offset(self, storage, 0, {0}, {});
}

// Dense npu and dense CPU tensors share one TensorImpl layout, so `param.data = t` and Module._apply
// (`.to("npu")`, `.npu()`, `.cpu()`) may swap one for the other in place and keep the Parameter
// object, as they do between CPU and CUDA. Optimizers built before the move then still hold the
// parameters the model trains. Other pairs keep PyTorch's own rule.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  const auto is_dense = [](c10::DispatchKeySet ks) {
    constexpr auto backends =
        c10::DispatchKeySet({c10::BackendComponent::CPUBit, c10::BackendComponent::PrivateUse1Bit});
    return ks.has(c10::DispatchKey::Dense) && ks.has_any(backends);
  };
  if (is_dense(self.key_set()) && is_dense(from.key_set())) {
    return true;
  }
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

// One copy_ per pair, as PyTorch's own slow path does on every backend: the pairs may mix npu and CPU tensors
// (torch._foreach_copy_((npu,), (cpu,)) copies across), which the redirect's single-device rule would refuse.
void foreach_copy_(at::TensorList self, at::TensorList src, bool non_blocking) {
  TORCH_CHECK(self.size() == src.size(), "Tensor lists must have the same number of tensors, got ", self.size(),
              " and ", src.size());
  for (size_t i = 0; i < self.size(); ++i) {
    self[i].copy_(src[i], non_blocking);
  }
}

void record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kNpu && stream.device_index() == self.device().index(),
              "record_stream: the stream is on ", stream.device(), " but the tensor is on ", self.device());
  npu_allocator()->recordStream(self.storage().data_ptr(), stream);
}

}  // namespace

at::Tensor empty_strided_npu(c10::IntArrayRef size, c10::IntArrayRef stride, c10::ScalarType dtype) {
  return empty_strided(size, stride, dtype, std::nullopt, std::nullopt, std::nullopt);
}

}  // namespace vnpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", vnpu::empty_memory_format);
  m.impl("empty_strided", vnpu::empty_strided);
  m.impl("_efficientzerotensor", vnpu::efficient_zero_tensor);
  m.impl("native_dropout", vnpu::native_dropout);
  m.impl("_copy_from", vnpu::copy_from);
  m.impl("_copy_from_and_resize", vnpu::copy_from_and_resize);
  m.impl("view", vnpu::view);
  m.impl("as_strided", vnpu::as_strided);
  m.impl("_reshape_alias", vnpu::reshape_alias);
  m.impl("resize_", vnpu::resize_);
  m.impl("set_.source_Storage", vnpu::set_storage);
  m.impl("set_.source_Storage_storage_offset", vnpu::set_storage_offset);
  m.impl("set_.source_Tensor", vnpu::set_tensor);
  m.impl("set_", vnpu::set_empty);
  m.impl("record_stream", vnpu::record_stream);
  m.impl("_foreach_copy_", vnpu::foreach_copy_);
  m.impl("_has_compatible_shallow_copy_type", vnpu::has_compatible_shallow_copy_type);
}

// _copy_from resolves conj/neg bits itself (the CPU copy does). Without these fallthroughs the
// Conjugate/Negative fallbacks would resolve the source through copy_ -> _copy_from -> ... forever.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
