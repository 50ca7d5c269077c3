#include "precision/StrongConsistency.h"

#include "aten/OpHooks.h"

#include <ATen/ATen.h>

#include <atomic>
#include <functional>
#include <mutex>

namespace vnpu {
namespace {

constexpr int64_t kRowBlock = 16;

std::mutex g_mu;
std::atomic<bool> g_on{false};

// The rows [first, first + count) of t along `dim`, padded with zero rows to kRowBlock.
at::Tensor block_of(const at::Tensor& t, int64_t dim, int64_t first, int64_t count) {
  at::Tensor rows = t.narrow(dim, first, count);
  if (count == kRowBlock) {
    return rows;
  }
  std::vector<int64_t> pad_shape = t.sizes().vec();
  pad_shape[dim] = kRowBlock - count;
  return at::cat({rows, at::zeros(pad_shape, t.options())}, dim);
}

// out[..., rows, :] = product(block of a's rows, block of the row-wise addend's rows) for each block.
at::Tensor in_row_blocks(const at::Tensor& a, const at::Tensor& addend,
                         const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& product) {
  const int64_t dim = a.dim() - 2;
  const int64_t m = a.size(dim);
  // an addend with a row per output row is cut with them; a broadcast one (a bias) goes whole to each block
  const bool row_wise = addend.defined() && addend.dim() >= 2 && addend.size(-2) == m && m > 1;
  const int64_t addend_dim = row_wise ? addend.dim() - 2 : 0;
  std::vector<at::Tensor> pieces;
  for (int64_t first = 0; first < m; first += kRowBlock) {
    const int64_t count = std::min(kRowBlock, m - first);
    at::Tensor part = row_wise ? block_of(addend, addend_dim, first, count) : addend;
    pieces.push_back(product(block_of(a, dim, first, count), part).narrow(dim, 0, count));
  }
  return pieces.empty() ? product(a, addend) : at::cat(pieces, dim);
}

}  // namespace

void set_strong_consistency(bool on) {
  std::lock_guard<std::mutex> guard(g_mu);
  if (on != g_on.load()) {
    g_slow_path_users.fetch_add(on ? 1 : -1);  // matmuls take the redirect, where run_in_row_blocks is
    g_on = on;
  }
}

bool strong_consistency() {
  return g_on.load(std::memory_order_relaxed);
}

bool run_in_row_blocks(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t base) {
  const auto& schema = op.schema();
  if (!schema.overload_name().empty()) {
    return false;  // the .out forms write the caller's tensor in one call
  }
  const std::string& name = schema.name();
  auto arg = [&](size_t i) -> const c10::IValue& { return (*stack)[base + i]; };
  at::Tensor result;
  if (name == "aten::mm" || name == "aten::bmm") {
    const at::Tensor other = arg(1).toTensor();
    const bool batched = name == "aten::bmm";
    result = in_row_blocks(arg(0).toTensor(), at::Tensor(), [&](const at::Tensor& rows, const at::Tensor&) {
      return batched ? at::bmm(rows, other) : at::mm(rows, other);
    });
  } else if (name == "aten::addmm" || name == "aten::baddbmm") {
    const at::Tensor self = arg(0).toTensor();
    const at::Tensor other = arg(2).toTensor();
    const c10::Scalar beta = arg(3).toScalar();
    const c10::Scalar alpha = arg(4).toScalar();
    const bool batched = name == "aten::baddbmm";
    result = in_row_blocks(arg(1).toTensor(), self, [&](const at::Tensor& rows, const at::Tensor& part) {
      return batched ? at::baddbmm(part, rows, other, beta, alpha) : at::addmm(part, rows, other, beta, alpha);
    });
  } else {
    return false;
  }
  torch::jit::drop(*stack, stack->size() - base);
  torch::jit::push(*stack, std::move(result));
  return true;
}

}  // namespace vnpu
