// Observers of npu operators (graph capture, dumps, overflow checks, profiling).
//
// The redirect calls the installed hooks around every npu operator. With none installed the cost
// is one relaxed atomic load per operator; with hooks installed operators take the boxed path,
// so a hook sees every operator's arguments and results as IValues (npu tensors, not aliases).
#pragma once

#include "aten/OpFacts.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace vnpu {

struct OpCall {
  const c10::OperatorHandle& op;
  const OpFacts& facts;
  c10::DeviceIndex device;
  const std::vector<c10::IValue>& inputs;   // the operator's arguments as the caller passed them
  const std::vector<c10::IValue>& outputs;  // its results
  int64_t start_ns;
  int64_t end_ns;
};

class OpHook {
 public:
  virtual ~OpHook() = default;
  // Before the kernel runs; may throw to refuse the operator.
  virtual void before(const c10::OperatorHandle& op, const OpFacts& facts, const std::vector<c10::IValue>& inputs) {}
  virtual void after(const OpCall& call) {}
};

void add_op_hook(const std::shared_ptr<OpHook>& hook);
void remove_op_hook(const std::shared_ptr<OpHook>& hook);

extern std::atomic<int> g_slow_path_users;
// True when operators must take the fully observable (boxed) path: hooks or precision emulation.
inline bool slow_path_active() {
  return g_slow_path_users.load(std::memory_order_relaxed) > 0;
}

void run_hooks_before(const c10::OperatorHandle& op, const OpFacts& facts, const std::vector<c10::IValue>& inputs);
void run_hooks_after(const OpCall& call);

// A collecting hook installed for a while (a profiling or counting session): start() installs a new one,
// replacing one still running; stop() uninstalls it and hands it back with what it collected.
template <class Hook>
class HookSession {
 public:
  template <class... Args>
  void start(Args&&... args) {
    std::lock_guard<std::mutex> guard(mu_);
    if (hook_) {
      remove_op_hook(hook_);
    }
    hook_ = std::make_shared<Hook>(std::forward<Args>(args)...);
    add_op_hook(hook_);
  }

  // nullptr when no session runs.
  std::shared_ptr<Hook> stop() {
    std::lock_guard<std::mutex> guard(mu_);
    if (hook_) {
      remove_op_hook(hook_);
    }
    return std::exchange(hook_, nullptr);
  }

  bool active() {
    std::lock_guard<std::mutex> guard(mu_);
    return hook_ != nullptr;
  }

 private:
  std::mutex mu_;
  std::shared_ptr<Hook> hook_;
};

}  // namespace vnpu
