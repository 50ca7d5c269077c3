// Sparse, quantized and nested tensors have no npu kernels (vnpu keeps npu memory dense): any
// operator that would compute on one on npu raises a clear error instead of PyTorch's
// "Could not run ... with arguments from the 'SparsePrivateUse1' backend". Sparse COO tensors raise
// torch_npu's own error, word for word: torch_npu answers every sparse COO operator with it, except the
// few that build and take apart a COO tensor (SparseCooStructure.cpp).
//
// Sparse compressed tensors can be built on npu, as in torch_npu: their structure operators (the
// member accessors and densification) run the host's kernels, which only read the member tensors;
// the two reductions torch_npu runs on the CPU are in SparseCsrReductions.cpp.
#include "runtime/ErrorCode.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

namespace vnpu {
namespace {

constexpr char kSparseCsrLayout[] = "sparse compressed (CSR/CSC/BSR/BSC)";

template <const char* kLayout>
void unsupported(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "The operator '", op.schema().operator_name(),
                              "' is not currently supported on the NPU backend: ", kLayout,
                              " tensors are not supported on npu (only strided, dense tensors are)");
}

// Operators that only read or assemble the member tensors of a sparse compressed tensor run the host's
// kernel (registered per operator: their CompositeExplicitAutograd defaults would win over a fallback).
void sparse_compressed_structure(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::SparseCsrCPU), stack);
}

void sparse_coo_unsupported(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  TORCH_CHECK(false, "CAUTION: The operator '", c10::toString(op.schema().operator_name()),
              "' is not currently supported on the NPU backend.", ops_not_supported_error());
}

constexpr char kQuantized[] = "quantized";
constexpr char kNested[] = "nested";

}  // namespace
}  // namespace vnpu

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&vnpu::sparse_coo_unsupported>());
}
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&vnpu::unsupported<vnpu::kSparseCsrLayout>>());
}
TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&vnpu::unsupported<vnpu::kQuantized>>());
}
TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&vnpu::unsupported<vnpu::kNested>>());
}
TORCH_LIBRARY_IMPL(aten, SparseCsrPrivateUse1, m) {
  for (const char* name : {"crow_indices", "col_indices", "ccol_indices", "row_indices", "values", "_nnz", "sparse_dim",
                           "dense_dim", "_to_dense"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&vnpu::sparse_compressed_structure>());
  }
}
