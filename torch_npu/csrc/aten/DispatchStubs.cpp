// DispatchStubs that composite operators consult by device type. Unregistered for npu they make
// a composite take another path than on the CPU (scaled_dot_product_attention would always pick
// the math backend); registered, npu decides exactly as the CPU does, on aliases of its tensors.
// libtorch_cpu (x86-64) is built with AVX2 and AVX512 kernels; DispatchStub's declarations must
// match that build or its inline members reference functions libtorch does not export.
#if defined(__x86_64__) && !defined(HAVE_AVX2_CPU_DEFINITION)
#define HAVE_AVX2_CPU_DEFINITION
#define HAVE_AVX512_CPU_DEFINITION
#endif
#include "aten/TensorMapping.h"

#include <ATen/Functions.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>

namespace vnpu {
namespace {

// The choice depends on which inputs require grad, so the alias carries that flag too.
at::Tensor alias_if_npu(const at::Tensor& t) {
  if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1) {
    return t;
  }
  at::Tensor alias = make_cpu_alias(t, /*owning=*/false);
  if (t.requires_grad()) {
    alias.set_requires_grad(true);
  }
  return alias;
}

int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa) {
  std::optional<at::Tensor> mask;
  if (attn_mask.has_value()) {
    mask = alias_if_npu(*attn_mask);
  }
  // The operator's CPU kernel is the CPU's implementation of this stub.
  return at::_fused_sdp_choice(alias_if_npu(query), alias_if_npu(key), alias_if_npu(value), mask, dropout_p,
                               is_causal, scale, enable_gqa);
}

}  // namespace
}  // namespace vnpu

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &vnpu::fused_sdp_choice)
}  // namespace at::native
