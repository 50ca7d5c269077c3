// torch_npu's explicit CPU kernels for the two sparse CSR reductions: _sparse_csr_sum and
// _sparse_csr_prod have no NPU kernel, so torch_npu copies the tensor to the host, reduces there and
// copies the result back, warning once, or refuses under TORCH_NPU_FALLBACK_CPU_DISABLE=1.
#include "runtime/ErrorCode.h"

#include <ATen/ATen.h>
#include <ATen/DeviceGuard.h>
#include <ATen/ops/_sparse_csr_prod.h>
#include <ATen/ops/_sparse_csr_sum.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace vnpu {
namespace {

bool cpu_fallback_disabled() {
  static const bool disabled = [] {
    const char* value = std::getenv("TORCH_NPU_FALLBACK_CPU_DISABLE");
    return value != nullptr && std::string(value) == "1";
  }();
  return disabled;
}

void check_explicit_fallback(const char* op) {
  TORCH_CHECK(!cpu_fallback_disabled(), "The operator '", op,
              "' would execute its main computation on CPU through an explicit CPU fallback kernel, because torch_npu "
              "currently provides only a CPU implementation for this Sparse CSR reduction, but CPU fallback is "
              "disabled by TORCH_NPU_FALLBACK_CPU_DISABLE=1.",
              ops_not_supported_error());
}

at::Tensor sparse_csr_sum(const at::Tensor& self, at::IntArrayRef dim, bool keepdim,
                          std::optional<at::ScalarType> dtype) {
  check_explicit_fallback("aten::_sparse_csr_sum.dim_dtype");
  TORCH_WARN_ONCE(
      "CPU fallback is allowed because TORCH_NPU_FALLBACK_CPU_DISABLE=0. Since the NPU interface does not support "
      "operator 'aten::_sparse_csr_sum.dim_dtype', the operator will fall back to CPU.");
  const at::OptionalDeviceGuard guard(at::device_of(self));
  return at::_sparse_csr_sum(self.cpu(), dim, keepdim, dtype).to(self.device());
}

at::Tensor sparse_csr_prod(const at::Tensor& self, at::IntArrayRef dim, bool keepdim,
                           std::optional<at::ScalarType> dtype) {
  check_explicit_fallback("aten::_sparse_csr_prod.dim_dtype");
  TORCH_WARN_ONCE(
      "CPU fallback is allowed because TORCH_NPU_FALLBACK_CPU_DISABLE=0. Since the NPU interface does not support "
      "operator 'aten::_sparse_csr_prod.dim_dtype', the operator will fall back to CPU.");
  const at::OptionalDeviceGuard guard(at::device_of(self));
  return at::_sparse_csr_prod(self.cpu(), dim, keepdim, dtype).to(self.device());
}

}  // namespace
}  // namespace vnpu

TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  m.impl("_sparse_csr_sum.dim_dtype", TORCH_FN(vnpu::sparse_csr_sum));
  m.impl("_sparse_csr_prod.dim_dtype", TORCH_FN(vnpu::sparse_csr_prod));
}
