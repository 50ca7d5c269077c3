// The card's FFT plan cache, kept as the card keeps it.
//
// On Ascend, op-plugin's FFT kernels build a plan for each problem and keep the plans in one process-wide
// least-recently-used cache: 10 plans unless torch.npu.backends.fft_plan_cache.max_size says otherwise (1 to 99);
// a plan is looked up by problem size, direction, plan kind and dtype, a hit moves it to the back, a new plan
// beyond the capacity evicts the oldest. vnpu computes FFTs with the CPU's library, which needs no plan kept,
// so the results are the CPU's; the cache here holds the keys the card would hold (one plan per transformed
// dimension: its length, the direction, c2c / r2c / c2r and the input dtype), so that fft_plan_cache.size and
// clear() answer as on the card.
#include "aten/FftPlans.h"

#include "aten/UnboxedRedirect.h"

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <list>
#include <mutex>

namespace vnpu {
namespace {

enum class PlanKind { kC2C, kR2C, kC2R };

struct PlanKey {
  int64_t length;
  bool forward;
  PlanKind kind;
  at::ScalarType dtype;
  bool operator==(const PlanKey& other) const {
    return length == other.length && forward == other.forward && kind == other.kind && dtype == other.dtype;
  }
};

struct PlanCache {
  std::mutex mu;
  std::list<PlanKey> plans;  // least recently used first
  int64_t capacity = 10;

  void evict_beyond_capacity() {
    while (static_cast<int64_t>(plans.size()) > capacity) {
      plans.pop_front();
    }
  }
  void use(const PlanKey& key) {
    std::lock_guard<std::mutex> lock(mu);
    auto hit = std::find(plans.begin(), plans.end(), key);
    if (hit != plans.end()) {
      plans.splice(plans.end(), plans, hit);
      return;
    }
    plans.push_back(key);
    evict_beyond_capacity();
  }
};

PlanCache& cache() {
  static auto* c = new PlanCache();
  return *c;
}

void use_plans(const at::Tensor& self, c10::SymIntArrayRef dims, bool forward, PlanKind kind,
               std::optional<int64_t> last_length = std::nullopt) {
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t dim = c10::maybe_wrap_dim(dims[i].expect_int(), self.dim());
    const bool last = i + 1 == dims.size();
    const int64_t length = last && last_length ? *last_length : self.size(dim);
    cache().use({length, forward, kind, self.scalar_type()});
  }
}

at::Tensor fft_c2c(const at::Tensor& self, c10::SymIntArrayRef dim, int64_t normalization, bool forward) {
  at::Tensor result = Unboxed<at::_ops::_fft_c2c>::call(self, dim, normalization, forward);
  use_plans(self, dim, forward, PlanKind::kC2C);
  return result;
}

at::Tensor fft_r2c(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, bool onesided) {
  at::Tensor result = Unboxed<at::_ops::_fft_r2c>::call(self, dim, normalization, onesided);
  use_plans(self, c10::fromIntArrayRefSlow(dim), /*forward=*/true, PlanKind::kR2C);
  return result;
}

at::Tensor fft_c2r(const at::Tensor& self, at::IntArrayRef dim, int64_t normalization, c10::SymInt last_dim_size) {
  at::Tensor result = Unboxed<at::_ops::_fft_c2r>::call(self, dim, normalization, last_dim_size);
  use_plans(self, c10::fromIntArrayRefSlow(dim), /*forward=*/false, PlanKind::kC2R, last_dim_size.expect_int());
  return result;
}

}  // namespace

int64_t fft_plan_cache_size() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return static_cast<int64_t>(cache().plans.size());
}

int64_t fft_plan_cache_max_size() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().capacity;
}

void set_fft_plan_cache_max_size(int64_t size) {
  TORCH_CHECK(size >= 1 && size <= 99, "invalid value of cache_size, expected 1 to 99");
  std::lock_guard<std::mutex> lock(cache().mu);
  cache().capacity = size;
  cache().evict_beyond_capacity();
}

void clear_fft_plan_cache() {
  std::lock_guard<std::mutex> lock(cache().mu);
  cache().plans.clear();
}

}  // namespace vnpu

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fft_c2c", TORCH_FN(vnpu::fft_c2c));
  m.impl("_fft_r2c", TORCH_FN(vnpu::fft_r2c));
  m.impl("_fft_c2r", TORCH_FN(vnpu::fft_c2r));
}
