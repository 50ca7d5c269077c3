// DispatchStubs that composite operators consult by device type. Unregistered for npu they make
// a composite take another path than on the CPU (scaled_dot_product_attention would always pick
// the math backend); registered, npu decides exactly as the CPU does, on aliases of its tensors.
#include "aten/DispatchStubBuild.h"
#include "aten/TensorMapping.h"

#include <ATen/EmptyTensor.h>
#include <ATen/Functions.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>

namespace vnpu {
namespace {

// The choice reads the inputs' metadata (shapes, strides, dtypes, which require grad), never their
// values. npu tensors are read through CPU aliases. The tensors of torch.compile's tracing (fake tensors,
// for which the meta kernel of _fused_sdp_choice calls this stub, and the functional wrappers over them,
// whose storage says npu but holds no memory; their sizes may be symbolic) are described by meta tensors
// made without the dispatcher, which a fake-tensor mode would otherwise intercept.
bool has_npu_memory(const c10::TensorImpl* impl) {
  return impl->has_storage() && impl->storage().device_type() == c10::DeviceType::PrivateUse1 &&
         impl->storage().data() != nullptr && !impl->has_symbolic_sizes_strides();
}

at::Tensor for_choice(const at::Tensor& t) {
  if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1) {
    return t;
  }
  const auto* impl = t.unsafeGetTensorImpl();
  at::Tensor view =
      has_npu_memory(impl)
          ? make_cpu_alias(t, /*owning=*/false)
          : at::Tensor(at::detail::empty_strided_symint_meta(t.sym_sizes(), t.sym_strides(), t.scalar_type()));
  if (t.requires_grad()) {
    view.set_requires_grad(true);
  }
  return view;
}

int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa) {
  std::optional<at::Tensor> mask;
  if (attn_mask.has_value()) {
    mask = for_choice(*attn_mask);
  }
  // The CPU's implementation of this stub, called directly: no dispatch, no fake-tensor mode.
  return at::native::_fused_sdp_choice_stub(c10::DeviceType::CPU, for_choice(query), for_choice(key), for_choice(value),
                                            mask, dropout_p, is_causal, scale, enable_gqa);
}

}  // namespace
}  // namespace vnpu

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &vnpu::fused_sdp_choice)
}  // namespace at::native
