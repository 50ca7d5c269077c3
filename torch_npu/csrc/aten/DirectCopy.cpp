// Copies between npu tensors of one device without the redirect's CPU aliases.
//
// The CPU copies two CPU tensors with a TensorIterator and copy_stub's CPU kernel, except for two shortcuts:
// float32 <-> float16 through FBGEMM (whose NaN encoding may differ from the element-wise conversion) and a
// blocked transpose of large column-major matrices (the same bytes, through a scratch tensor). The first
// takes the redirect here, so the CPU kernel writes exactly what it writes on the CPU; the second copies
// element-wise, without the scratch tensor. Casts from complex to real (the CPU warns once), quantized,
// conjugate or negative-bit tensors and every call that fails take the redirect, which runs or raises it with
// torch_npu's text. Conversions (_to_copy) that stay on the device and clones run the composites the CPU
// runs: an empty npu tensor and this copy.
#include "aten/DirectCopy.h"

#include "aten/DirectAdmission.h"
#include "aten/DispatchStubBuild.h"

#include <ATen/TensorIterator.h>
#include <ATen/native/Copy.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/clone_native.h>

namespace vnpu {
namespace {

bool fbgemm_converts(const at::Tensor& self, const at::Tensor& src) {
  const auto to = self.scalar_type();
  const auto from = src.scalar_type();
  const bool float_half = (to == at::kFloat && from == at::kHalf) || (to == at::kHalf && from == at::kFloat);
  return float_half &&
         ((self.is_contiguous() && src.is_contiguous()) ||
          (self.is_non_overlapping_and_dense() && self.strides() == src.strides())) &&
         self.sizes() == src.sizes();
}

bool plain(const at::Tensor& t) {
  return t.defined() && t.device().type() == kNpu && t.layout() == c10::kStrided && !t._is_zerotensor() &&
         !t.is_conj() && !t.is_neg() && !t.is_quantized();
}

bool same_data(const at::Tensor& self, const at::Tensor& src) {
  return self.is_alias_of(src) && self.storage_offset() == src.storage_offset() && self.strides() == src.strides() &&
         self.sizes() == src.sizes() && self.scalar_type() == src.scalar_type();
}

}  // namespace

bool copy_between_npu_tensors(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  if (!runs_on_npu_tensors(Unboxed<at::_ops::copy_>::facts()) || !plain(self) || !plain(src) ||
      self.device() != src.device() || self.device().index() != current_device() || g_in_bad_fork ||
      g_stopped_devices.load(std::memory_order_relaxed) != 0 || fbgemm_converts(self, src) ||
      (src.is_complex() && !self.is_complex() && self.scalar_type() != at::kBool)) {
    return false;
  }
  check_in_bounds(self);  // the redirect's check and error
  check_in_bounds(src);
  if (self.is_same(src) || same_data(self, src)) {
    return true;
  }
  try {
    auto iter = at::TensorIteratorConfig()
                    .add_output(self)
                    .add_const_input(src)
                    .resize_outputs(false)
                    .check_all_same_dtype(false)
                    .check_all_same_device(false)
                    .build();
    if (iter.numel() != 0) {
      DevicePoolScope scope(self.device().index());  // the device is busy
      at::native::copy_stub(c10::DeviceType::CPU, iter, non_blocking);
    }
    return true;
  } catch (const c10::OutOfMemoryError&) {
    throw;
  } catch (const c10::Error&) {
    return false;  // nothing was written: the redirect raises the error with torch_npu's text
  }
}

std::optional<at::Tensor> to_copy_on_its_device(const at::Tensor& self, std::optional<at::ScalarType> dtype,
                                                std::optional<at::Layout> layout, std::optional<at::Device> device,
                                                std::optional<bool> pin_memory, bool non_blocking,
                                                std::optional<at::MemoryFormat> memory_format) {
  Admission admission;
  if (!admitted<at::_ops::_to_copy, StaysOnItsDevice>(admission, self, dtype, layout, device, pin_memory, non_blocking,
                                                      memory_format)) {
    return std::nullopt;
  }
  try {
    return at::native::_to_copy(self, dtype, layout, device, pin_memory, non_blocking, memory_format);
  } catch (const c10::OutOfMemoryError&) {
    throw;
  } catch (const c10::Error&) {
    return std::nullopt;  // the redirect raises it with torch_npu's text
  }
}

std::optional<at::Tensor> clone_on_its_device(const at::Tensor& self, std::optional<at::MemoryFormat> memory_format) {
  Admission admission;
  if (!admitted<at::_ops::clone, AnyDtype>(admission, self, memory_format)) {
    return std::nullopt;
  }
  try {
    return at::native::clone(self, memory_format);
  } catch (const c10::OutOfMemoryError&) {
    throw;
  } catch (const c10::Error&) {
    return std::nullopt;  // the redirect raises it with torch_npu's text
  }
}

}  // namespace vnpu
