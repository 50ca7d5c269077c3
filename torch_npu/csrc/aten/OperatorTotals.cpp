#include "aten/OperatorTotals.h"

#include "aten/OpHooks.h"

#include <memory>
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

std::mutex g_session_mu;
std::shared_ptr<TotalsHook> g_session;

}  // namespace

void start_operator_totals() {
  std::lock_guard<std::mutex> guard(g_session_mu);
  if (g_session) {
    remove_op_hook(g_session);
  }
  g_session = std::make_shared<TotalsHook>();
  add_op_hook(g_session);
}

std::map<std::string, std::pair<int64_t, int64_t>> stop_operator_totals() {
  std::lock_guard<std::mutex> guard(g_session_mu);
  if (!g_session) {
    return {};
  }
  remove_op_hook(g_session);
  auto totals = g_session->take();
  g_session.reset();
  return totals;
}

}  // namespace vnpu
