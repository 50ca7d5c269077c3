#include "runtime/MemoryHistory.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>

namespace vnpu {
namespace {

struct History {
  std::mutex mu;
  std::deque<HistoryEntry> entries;
  size_t max_entries = 0;
  ContextFn context = nullptr;
};

History& history() {
  static auto* h = new History();
  return *h;
}

std::atomic<bool> g_enabled{false};

}  // namespace

void set_memory_history(bool enabled, ContextFn context, size_t max_entries) {
  auto& h = history();
  std::lock_guard<std::mutex> guard(h.mu);
  h.context = context;
  h.max_entries = max_entries;
  if (!enabled) {
    h.entries.clear();
  }
  while (h.entries.size() > max_entries) {
    h.entries.pop_front();
  }
  g_enabled.store(enabled);
}

bool memory_history_enabled() {
  return g_enabled.load(std::memory_order_relaxed);
}

void record_memory_event(const char* action, c10::DeviceIndex device, uintptr_t address, size_t size) {
  if (!memory_history_enabled()) {
    return;
  }
  auto& h = history();
  ContextFn context;
  {
    std::lock_guard<std::mutex> guard(h.mu);
    context = h.context;
  }
  // Stacks are gathered outside the lock (gathering Python frames may take the GIL).
  std::shared_ptr<c10::GatheredContext> stack = context ? context() : nullptr;
  const auto now =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  std::lock_guard<std::mutex> guard(h.mu);
  h.entries.push_back(HistoryEntry{action, device, address, size, now, std::move(stack)});
  while (h.entries.size() > h.max_entries) {
    h.entries.pop_front();
  }
}

std::vector<HistoryEntry> memory_history() {
  auto& h = history();
  std::lock_guard<std::mutex> guard(h.mu);
  return {h.entries.begin(), h.entries.end()};
}

}  // namespace vnpu
