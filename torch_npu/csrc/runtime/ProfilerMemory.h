// Memory events for torch_npu.profiler's profile_memory files: every block the caching allocator
// hands out or takes back, and every segment it returns, with the device totals after the change.
// Appended under the allocator's device lock (the buffer's own mutex is a leaf lock), collected once
// when profiling stops. With recording off the cost is one relaxed atomic load per allocation.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

namespace vnpu {

struct ProfilerMemoryEvent {
  int64_t ptr = 0;
  int64_t bytes = 0;      // > 0 allocation, < 0 release, 0 a segment returned (reserved changed)
  int64_t allocated = 0;  // device totals after the event
  int64_t reserved = 0;
  int64_t active = 0;
  int device = -1;
  int64_t stream = 0;
  int64_t time_ns = 0;       // the steady clock of now_ns()
  uint64_t thread = 0;       // at::RecordFunction::currentThreadId(), as the profiler's host events
  uint64_t correlation = 0;  // the host operator being profiled on this thread (ProfilerCorrelation.h)
};

extern std::atomic<bool> g_profiler_memory_on;

inline bool profiler_memory_on() {
  return g_profiler_memory_on.load(std::memory_order_relaxed);
}

void record_profiler_memory(int64_t ptr, int64_t bytes, int64_t allocated, int64_t reserved, int64_t active, int device,
                            int64_t stream);
void start_profiler_memory();
std::vector<ProfilerMemoryEvent> stop_profiler_memory();

}  // namespace vnpu
