// Copies between npu tensors of one device without the redirect's CPU aliases.
//
// The CPU copies two CPU tensors with a TensorIterator and copy_stub's CPU kernel, except for two shortcuts:
// float32 <-> float16 through FBGEMM (whose NaN encoding may differ from the element-wise conversion) and a
// blocked transpose of large column-major matrices (the same bytes, through a scratch tensor). The first
// takes the redirect here, so the CPU kernel writes exactly what it writes on the CPU; the second copies
// element-wise, without the scratch tensor. Casts from complex to real (the CPU warns once), quantized,
// conjugate or negative-bit tensors and every call that fails take the redirect, which runs or raises it with
// torch_npu's text. Conversions (_to_copy) that stay on the device and clones run the composites the CPU runs
// (UnboxedRedirect.cpp): an empty npu tensor and this copy.
#include "aten/DirectCopy.h"

#include "aten/DirectAdmission.h"
#include "aten/DispatchStubBuild.h"

#include <ATen/TensorIterator.h>
#include <ATen/native/Copy.h>

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

// A strided tensor without lazy conjugate / negative bits (the redirect resolves those).
bool plain(const at::Tensor& t) {
  return t.layout() == c10::kStrided && !t.is_conj() && !t.is_neg() && !t.is_quantized();
}

bool same_data(const at::Tensor& self, const at::Tensor& src) {
  return self.is_alias_of(src) && self.storage_offset() == src.storage_offset() && self.strides() == src.strides() &&
         self.sizes() == src.sizes() && self.scalar_type() == src.scalar_type();
}

}  // namespace

bool copy_between_npu_tensors(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  // The admission takes self (its device, bounds, zero tensors); src may have another dtype, not another device.
  Admission admission;
  if (!admitted<at::_ops::copy_, AnyDtype>(admission, self) || !src.defined() || src._is_zerotensor() ||
      src.device() != self.device() || !plain(self) || !plain(src) || fbgemm_converts(self, src) ||
      (src.is_complex() && !self.is_complex() && self.scalar_type() != at::kBool)) {
    return false;
  }
  check_in_bounds(src);  // the redirect's check and error
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

}  // namespace vnpu
