#include "runtime/ProfilerMemory.h"

#include "runtime/ProfilerCorrelation.h"
#include "runtime/Stream.h"

#include <ATen/record_function.h>

#include <mutex>

namespace vnpu {

std::atomic<bool> g_profiler_memory_on{false};

namespace {

struct Buffer {
  std::mutex mu;
  std::vector<ProfilerMemoryEvent> events;
};

Buffer& buffer() {
  static auto* b = new Buffer();
  return *b;
}

}  // namespace

void record_profiler_memory(int64_t ptr, int64_t bytes, int64_t allocated, int64_t reserved, int64_t active, int device,
                            int64_t stream) {
  ProfilerMemoryEvent e;
  e.ptr = ptr;
  e.bytes = bytes;
  e.allocated = allocated;
  e.reserved = reserved;
  e.active = active;
  e.device = device;
  e.stream = stream;
  e.time_ns = now_ns();
  e.thread = at::RecordFunction::currentThreadId();
  e.correlation = current_correlation();
  auto& b = buffer();
  std::lock_guard<std::mutex> guard(b.mu);
  b.events.push_back(e);
}

void start_profiler_memory() {
  auto& b = buffer();
  std::lock_guard<std::mutex> guard(b.mu);
  b.events.clear();
  g_profiler_memory_on.store(true, std::memory_order_relaxed);
}

std::vector<ProfilerMemoryEvent> stop_profiler_memory() {
  g_profiler_memory_on.store(false, std::memory_order_relaxed);
  auto& b = buffer();
  std::lock_guard<std::mutex> guard(b.mu);
  return std::move(b.events);
}

}  // namespace vnpu
