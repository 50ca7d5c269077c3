// aten::dropout on npu takes the CPU's path.
//
// ATen's dropout composite calls the fused native_dropout on accelerators (PrivateUse1 included) and
// multiplies by a scaled Bernoulli noise tensor on the CPU; the two round differently (NaN and signed
// zero inputs, scales not exact in the input's dtype). npu runs the CPU's kernels, so it runs the
// CPU's dropout: the same operators in the same order, on npu tensors, differentiable through them.
//
// Traced tensors (FakeTensor, FunctionalTensor: torch.compile, export) take ATen's composite, as the CPU's
// do: a compiled graph then holds what the CPU's compiled graph holds (native_dropout, which inductor
// decomposes the same way on both devices), so compiled npu code draws the CPU's masks.
#include <ATen/ATen.h>
#include <ATen/ops/dropout_native.h>
#include <torch/library.h>

namespace vnpu {
namespace {

at::Tensor dropout(const at::Tensor& input, double p, bool train) {
  if (input.key_set().has(c10::DispatchKey::Python)) {
    return at::native::dropout(input, p, train);
  }
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  if (p == 0 || !train || input.sym_numel() == 0) {
    return input;
  }
  if (p == 1) {
    return input.mul(at::zeros({}, input.options()));
  }
  at::Tensor noise = at::empty_like(input);
  noise.bernoulli_(1 - p);
  noise.div_(1 - p);
  return input.mul(noise);
}

}  // namespace
}  // namespace vnpu

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("dropout", &vnpu::dropout);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("dropout", &vnpu::dropout);
}
