#include "profiler/OperatorTotals.h"

#include "aten/OpHooks.h"

#include <mutex>
#include <unordered_map>

namespace vnpu {
namespace {

class TotalsHook final : public OpHook {
 public:
  void after(const OpCall& call) override {
    std::lock_guard<std::mutex> guard(mu_);
    auto& entry = totals_[&call.facts];
    entry.first += 1;
    entry.second += call.end_ns - call.start_ns;
  }

  std::map<std::string, std::pair<int64_t, int64_t>> take() {
    std::lock_guard<std::mutex> guard(mu_);
    std::map<std::string, std::pair<int64_t, int64_t>> out;
    for (const auto& [facts, entry] : totals_) {
      auto& merged = out[facts->name];
      merged.first += entry.first;
      merged.second += entry.second;
    }
    totals_.clear();
    return out;
  }

 private:
  std::mutex mu_;
  std::unordered_map<const OpFacts*, std::pair<int64_t, int64_t>> totals_;  // facts live as long as the process
};

HookSession<TotalsHook>& session() {
  static auto* s = new HookSession<TotalsHook>();
  return *s;
}

}  // namespace

void start_operator_totals() {
  session().start();
}

std::map<std::string, std::pair<int64_t, int64_t>> stop_operator_totals() {
  auto totals = session().stop();
  return totals ? totals->take() : std::map<std::string, std::pair<int64_t, int64_t>>{};
}

}  // namespace vnpu
