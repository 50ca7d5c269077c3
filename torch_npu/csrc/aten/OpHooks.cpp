#include "aten/OpHooks.h"

#include <algorithm>
#include <mutex>

namespace vnpu {
namespace {

struct Registry {
  std::mutex mu;
  // Copy-on-write: operators read a snapshot without holding the lock while hooks run.
  std::shared_ptr<const std::vector<std::shared_ptr<OpHook>>> hooks =
      std::make_shared<const std::vector<std::shared_ptr<OpHook>>>();
};

Registry& registry() {
  static auto* r = new Registry();
  return *r;
}

std::shared_ptr<const std::vector<std::shared_ptr<OpHook>>> snapshot() {
  auto& r = registry();
  std::lock_guard<std::mutex> guard(r.mu);
  return r.hooks;
}

}  // namespace

std::atomic<int> g_slow_path_users{0};

void add_op_hook(const std::shared_ptr<OpHook>& hook) {
  auto& r = registry();
  std::lock_guard<std::mutex> guard(r.mu);
  auto next = std::make_shared<std::vector<std::shared_ptr<OpHook>>>(*r.hooks);
  next->push_back(hook);
  r.hooks = std::move(next);
  g_slow_path_users.fetch_add(1);
}

void remove_op_hook(const std::shared_ptr<OpHook>& hook) {
  auto& r = registry();
  std::lock_guard<std::mutex> guard(r.mu);
  auto next = std::make_shared<std::vector<std::shared_ptr<OpHook>>>(*r.hooks);
  auto it = std::find(next->begin(), next->end(), hook);
  if (it != next->end()) {
    next->erase(it);
    r.hooks = std::move(next);
    g_slow_path_users.fetch_sub(1);
  }
}

void run_hooks_before(const c10::OperatorHandle& op, const OpFacts& facts, const std::vector<c10::IValue>& inputs) {
  for (const auto& hook : *snapshot()) {
    hook->before(op, facts, inputs);
  }
}

void run_hooks_after(const OpCall& call) {
  for (const auto& hook : *snapshot()) {
    hook->after(call);
  }
}

}  // namespace vnpu
