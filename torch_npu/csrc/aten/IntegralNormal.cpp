// normal_ on integer and bool npu tensors, as the card fills them.
//
// The CPU's normal_ kernel takes floating and complex tensors only ('"normal_kernel_cpu" not implemented
// for 'Int''). The card's normal kernel (aclnnInplaceNormal, what torch_npu's normal_ calls) also fills
// INT8/16/32/64, UINT8 and BOOL tensors, so `torch.randn(shape, dtype=torch.int32, device="npu")` works
// on Ascend and Ascend's own tests use it. vnpu draws the float32 normal of the same shape from the
// same npu generator and casts it into the tensor: integers truncate toward zero, bool is "not zero".
// Floating and complex tensors take the redirect (the CPU's kernel) unchanged.
#include "aten/OpFacts.h"
#include "aten/Redirect.h"

#include <ATen/ATen.h>
#include <torch/library.h>

namespace vnpu {
namespace {

void normal_(const c10::OperatorHandle& op, c10::DispatchKeySet /*ks*/, torch::jit::Stack* stack) {
  // normal_(Tensor(a!) self, float mean=0, float std=1, *, Generator? generator=None)
  const size_t base = stack->size() - 4;
  at::Tensor self = (*stack)[base].toTensor();
  const c10::ScalarType dtype = self.scalar_type();
  if (!c10::isIntegralType(dtype, /*includeBool=*/true)) {
    static const OpFacts& facts = op_facts_of(op.schema());  // looked up once: normal_ has one schema
    run_redirect(facts, op, stack);
    return;
  }
  const double mean = (*stack)[base + 1].toDouble();
  const double std = (*stack)[base + 2].toDouble();
  const std::optional<at::Generator> generator = (*stack)[base + 3].toOptional<at::Generator>();
  at::Tensor drawn = at::empty(self.sizes(), self.options().dtype(at::kFloat));
  drawn.normal_(mean, std, generator);
  self.copy_(drawn);
  torch::jit::drop(*stack, 4);
  stack->emplace_back(std::move(self));
}

}  // namespace
}  // namespace vnpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("normal_", torch::CppFunction::makeFromBoxedFunction<&vnpu::normal_>());
}
