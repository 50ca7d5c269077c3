#include "runtime/MemoryHistory.h"

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <string_view>
#include <unordered_map>

namespace vnpu {
namespace {

struct History {
  std::mutex mu;
  std::deque<HistoryEntry> entries;
  std::unordered_map<uintptr_t, HistoryEntry> live;  // allocation event per allocated address
  bool trace = false;
  size_t max_entries = 0;
  ContextFn context = nullptr;
};

History& history() {
  static auto* h = new History();
  return *h;
}

}  // namespace

std::atomic<bool> g_memory_history_enabled{false};

void set_memory_history(bool enabled, bool trace, ContextFn context, size_t max_entries) {
  auto& h = history();
  std::lock_guard<std::mutex> guard(h.mu);
  h.context = context;
  h.max_entries = max_entries;
  h.trace = enabled && trace;
  if (!h.trace) {
    h.entries.clear();
  }
  if (!enabled) {
    h.live.clear();
  }
  while (h.entries.size() > max_entries) {
    h.entries.pop_front();
  }
  g_memory_history_enabled.store(enabled);
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
  HistoryEntry entry{action, device, address, size, now, std::move(stack)};
  const std::string_view kind(action);
  std::lock_guard<std::mutex> guard(h.mu);
  if (kind == "alloc") {
    h.live.insert_or_assign(address, entry);
  } else if (kind == "free_requested" || kind == "free_completed") {
    h.live.erase(address);
  }
  if (!h.trace) {
    return;
  }
  h.entries.push_back(std::move(entry));
  while (h.entries.size() > h.max_entries) {
    h.entries.pop_front();
  }
}

std::vector<HistoryEntry> memory_history() {
  auto& h = history();
  std::lock_guard<std::mutex> guard(h.mu);
  return {h.entries.begin(), h.entries.end()};
}

std::vector<HistoryEntry> live_allocation_events() {
  auto& h = history();
  std::lock_guard<std::mutex> guard(h.mu);
  std::vector<HistoryEntry> out;
  out.reserve(h.live.size());
  for (const auto& [address, entry] : h.live) {
    out.push_back(entry);
  }
  return out;
}

}  // namespace vnpu
