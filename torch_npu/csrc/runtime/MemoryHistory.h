// torch.npu.memory._record_memory_history: a bounded log of allocator events (allocations, frees,
// segment maps and unmaps, OOMs) with the Python stack that caused each, and the allocation event of each block
// still allocated (its stack), for PyTorch's memory-snapshot format (torch.npu.memory._snapshot / _dump_snapshot,
// memory_viz). enabled="state" keeps only the latter, as PyTorch's does.
#pragma once

#include <c10/core/Allocator.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace vnpu {

struct HistoryEntry {
  std::string action;  // alloc, free_requested, free_completed, segment_alloc, segment_free, oom
  c10::DeviceIndex device;
  uintptr_t address;
  size_t size;
  int64_t time_us;
  std::shared_ptr<c10::GatheredContext> context;  // the stack, when recorded
};

using ContextFn = std::shared_ptr<c10::GatheredContext> (*)();

// enabled: record; trace: keep the log of events too; context: how to capture stacks (nullptr: none);
// max_entries: the log's ring size.
void set_memory_history(bool enabled, bool trace, ContextFn context, size_t max_entries);
extern std::atomic<bool> g_memory_history_enabled;
inline bool memory_history_enabled() {
  return g_memory_history_enabled.load(std::memory_order_relaxed);
}
void record_memory_event(const char* action, c10::DeviceIndex device, uintptr_t address, size_t size);
std::vector<HistoryEntry> memory_history();
// The allocation events of the blocks allocated now (recorded while enabled), by address.
std::vector<HistoryEntry> live_allocation_events();

}  // namespace vnpu
