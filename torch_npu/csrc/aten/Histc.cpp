// histc on npu tensors, as torch_npu's histc (aclnnHistc) computes it.
//
// torch_npu checks the arguments itself: half tensors are refused ("HalfTensor is not supported"), bins must be
// positive, and the range is settled in double (min == max takes the tensor's own min and max, an empty range is
// widened by one on both sides) before the range checks. The card counts integer tensors too (INT8/16/32/64 and
// UINT8, the counts in the tensor's dtype), which the CPU's kernel refuses and CUDA code relies on (transformers'
// mixture-of-experts layers count tokens per expert with histc on int32 ids off the CPU). Integer tensors are
// counted here as their exact double values are by the CPU's kernel; floating tensors take the redirect.
#include "aten/OpFacts.h"
#include "aten/Redirect.h"
#include "aten/TensorMapping.h"
#include "runtime/ErrorCode.h"

#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cmath>
#include <utility>

namespace vnpu {
namespace {

std::pair<double, double> settled_range(const at::Tensor& self, int64_t bins, const at::Scalar& min,
                                        const at::Scalar& max) {
  TORCH_CHECK(self.scalar_type() != at::kHalf, "HalfTensor is not supported", ops_type_error());
  TORCH_CHECK(bins > 0, "bins must be > 0", ops_value_error());
  double left = min.to<double>();
  double right = max.to<double>();
  if (left == right && self.numel() > 0) {
    const auto [low, high] = at::aminmax(self);
    left = low.item<double>();
    right = high.item<double>();
  }
  if (left == right) {
    left -= 1.0;
    right += 1.0;
  }
  TORCH_CHECK(!(std::isinf(left) || std::isinf(right) || std::isnan(left) || std::isnan(right)), "range of [", left,
              ", ", right, "] is not finite", ops_value_error());
  TORCH_CHECK(left < right, "max must be larger than min", ops_value_error());
  return {left, right};
}

// histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) and its out= form (one more argument).
void histc(const c10::OperatorHandle& op, c10::DispatchKeySet /*ks*/, torch::jit::Stack* stack) {
  const size_t nargs = op.schema().arguments().size();
  const size_t base = stack->size() - nargs;
  const at::Tensor self = (*stack)[base].toTensor();
  const int64_t bins = (*stack)[base + 1].toInt();
  const auto [left, right] = settled_range(self, bins, (*stack)[base + 2].toScalar(), (*stack)[base + 3].toScalar());
  if (!c10::isIntegralType(self.scalar_type(), /*includeBool=*/false)) {
    (*stack)[base + 2] = at::Scalar(left);
    (*stack)[base + 3] = at::Scalar(right);
    run_redirect(op_facts_of(op.schema()), op, stack);
    return;
  }
  // counted on the host in double (the npu tensor's dtype-only conversion to double would give float32)
  const at::Tensor host = make_cpu_alias(self, /*owning=*/false).to(at::kDouble);
  at::Tensor counts = at::histc(host, bins, left, right).to(self.options());
  if (nargs == 5) {
    at::Tensor out = (*stack)[base + 4].toTensor();
    TORCH_CHECK(out.scalar_type() == self.scalar_type(),
                "torch.histc: input tensor and hist tensor should have the same dtype, but got input ",
                self.scalar_type(), " and hist ", out.scalar_type());
    at::native::resize_output(out, counts.sizes());
    out.copy_(counts);
    counts = out;
  }
  torch::jit::drop(*stack, nargs);
  stack->emplace_back(std::move(counts));
}

}  // namespace
}  // namespace vnpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("histc", torch::CppFunction::makeFromBoxedFunction<&vnpu::histc>());
  m.impl("histc.out", torch::CppFunction::makeFromBoxedFunction<&vnpu::histc>());
}
