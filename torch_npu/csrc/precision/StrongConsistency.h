// Deterministic level 2 (torch_npu.npu.set_deterministic_level(2), CANN's "strong consistency"): a matmul
// row's result depends on that row's data only, not on where it sits or how many rows share the call
// (mm(a[:1], b) equals mm(a, b)[:1] bit for bit). The CPU's BLAS picks its blocking from the shapes, so
// rows of one call and of another can sum in different orders; under level 2 the matmul operators run in
// blocks of a fixed row count (the last one padded with zero rows), so every row goes through a product of
// one shape. It costs time, as it does on the card.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace vnpu {

void set_strong_consistency(bool on);
bool strong_consistency();

// Runs mm / addmm / bmm / baddbmm (whose CPU arguments are on the stack from `base`) in row blocks and
// leaves the result on the stack; false, with the stack untouched, for any other operator.
bool run_in_row_blocks(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t base);

}  // namespace vnpu
