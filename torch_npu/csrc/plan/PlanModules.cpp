#include "plan/PlanModules.h"

#include "plan/PlanMemory.h"

#include <ATen/SequenceNumber.h>
#include <torch/csrc/autograd/function.h>

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

namespace vnpu {
namespace {

thread_local std::vector<int32_t> tl_modules;

// (first sequence number drawn while a module ran, that module) in drawing order, for forwards run
// outside the autograd engine.
struct ForwardTimeline {
  std::mutex mu;
  std::vector<std::pair<uint64_t, int32_t>> changes;
};
ForwardTimeline& timeline() {
  static auto* t = new ForwardTimeline();
  return *t;
}

void note_change() {
  if (torch::autograd::get_current_node() != nullptr) {
    return;  // a forward re-run inside backward (activation checkpointing) draws the engine's numbers
  }
  const int32_t module = tl_modules.empty() ? -1 : tl_modules.back();
  auto& t = timeline();
  std::lock_guard<std::mutex> lock(t.mu);
  const uint64_t next = at::sequence_number::peek();
  if (!t.changes.empty() && t.changes.back().first == next) {
    t.changes.back().second = module;  // nothing drawn since the last change
  } else {
    t.changes.emplace_back(next, module);
  }
}

}  // namespace

void plan_enter_module(const std::string& name) {
  tl_modules.push_back(plan_module_id(name));
  plan_label().module = tl_modules.back();
  note_change();
}

void plan_exit_module() {
  if (!tl_modules.empty()) {
    tl_modules.pop_back();
  }
  plan_label().module = tl_modules.empty() ? -1 : tl_modules.back();
  note_change();
}

int32_t plan_current_module() {
  if (!tl_modules.empty()) {
    return tl_modules.back();
  }
  const auto node = torch::autograd::get_current_node();
  if (node == nullptr) {
    return -1;
  }
  const uint64_t seq = node->sequence_nr();
  int32_t module = -1;
  {
    auto& t = timeline();
    std::lock_guard<std::mutex> lock(t.mu);
    auto it = std::upper_bound(t.changes.begin(), t.changes.end(), std::make_pair(seq, INT32_MAX));
    if (it != t.changes.begin()) {
      module = std::prev(it)->second;
    }
  }
  return module < 0 ? -1 : plan_module_id("backward of " + plan_module_name(module));
}

}  // namespace vnpu
