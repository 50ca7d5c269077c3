#include "distributed/LinkReduce.h"

#include <ATen/Functions.h>

#include <algorithm>
#include <cstring>

namespace vnpu {
namespace {

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("O3")  // the loops below vectorize; they run at memory speed only so
#endif
// One pass over each part: the partial sums of a block stay in L1, and a block is written only once all of
// its inputs are read (so `out` may alias a part).
template <typename T>
void sum_parts(T* out, const std::vector<const T*>& parts, int64_t n) {
  constexpr int64_t kBlock = 2048;
  T partial[kBlock];
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t len = std::min(kBlock, n - start);
    const T* a = parts[0] + start;
    const T* b = parts[1] + start;
    for (int64_t j = 0; j < len; ++j) {
      partial[j] = a[j] + b[j];
    }
    for (size_t k = 2; k < parts.size(); ++k) {
      const T* next = parts[k] + start;
      for (int64_t j = 0; j < len; ++j) {
        partial[j] += next[j];
      }
    }
    std::memcpy(out + start, partial, len * sizeof(T));
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

template <typename T>
void sum_as(uint8_t* out, const std::vector<const uint8_t*>& parts, int64_t n) {
  std::vector<const T*> typed;
  typed.reserve(parts.size());
  for (const auto* p : parts) {
    typed.push_back(reinterpret_cast<const T*>(p));
  }
  sum_parts(reinterpret_cast<T*>(out), typed, n);
}

// The common sums: the same IEEE additions in the same order as at::add, in one pass.
bool fused_sum(uint8_t* out, const std::vector<const uint8_t*>& parts, int64_t n, at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: sum_as<float>(out, parts, n); return true;
    case at::kDouble: sum_as<double>(out, parts, n); return true;
    case at::kInt: sum_as<uint32_t>(out, parts, n); return true;  // wrapping, as at::add wraps
    case at::kLong: sum_as<uint64_t>(out, parts, n); return true;
    default: return false;
  }
}

void combine(at::Tensor& acc, const at::Tensor& other, LinkReduce op) {
  switch (op) {
    case LinkReduce::kSum: acc.add_(other); return;
    case LinkReduce::kProduct: acc.mul_(other); return;
    case LinkReduce::kMin: at::minimum_out(acc, acc, other); return;
    case LinkReduce::kMax: at::maximum_out(acc, acc, other); return;
  }
}

}  // namespace

void reduce_into(uint8_t* out, const std::vector<const uint8_t*>& parts, int64_t n, at::ScalarType dtype,
                 LinkReduce op) {
  if (n == 0) {
    return;
  }
  if (parts.size() >= 2 && op == LinkReduce::kSum && fused_sum(out, parts, n, dtype)) {
    return;
  }
  const auto options = at::TensorOptions().dtype(dtype);
  auto blob = [&](const uint8_t* p) { return at::from_blob(const_cast<uint8_t*>(p), {n}, options); };
  at::Tensor acc = blob(parts[0]).clone();
  for (size_t k = 1; k < parts.size(); ++k) {
    combine(acc, blob(parts[k]), op);
  }
  std::memcpy(out, acc.data_ptr(), n * c10::elementSize(dtype));
}

}  // namespace vnpu
