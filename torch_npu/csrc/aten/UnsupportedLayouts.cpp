// Sparse, quantized and nested tensors have no npu implementation (vnpu keeps npu memory dense):
// any operator that would create or take one on npu raises a clear error instead of PyTorch's
// "Could not run ... with arguments from the 'SparsePrivateUse1' backend".
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

namespace vnpu {
namespace {

template <const char* kLayout>
void unsupported(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "The operator '", op.schema().operator_name(),
                              "' is not currently supported on the NPU backend: ", kLayout,
                              " tensors are not supported on npu (only strided, dense tensors are)");
}

constexpr char kSparse[] = "sparse (COO)";
constexpr char kSparseCsr[] = "sparse compressed (CSR/CSC/BSR/BSC)";
constexpr char kQuantized[] = "quantized";
constexpr char kNested[] = "nested";

}  // namespace
}  // namespace vnpu

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&vnpu::unsupported<vnpu::kSparse>>());
}
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&vnpu::unsupported<vnpu::kSparseCsr>>());
}
TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&vnpu::unsupported<vnpu::kQuantized>>());
}
TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&vnpu::unsupported<vnpu::kNested>>());
}
