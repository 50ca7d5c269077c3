// Trace points of the runtime for tools that check what the card would order (torch_npu's stream
// sanitizer, TORCH_NPU_SANITIZER): events created, deleted, recorded, waited on and synchronised,
// streams created and synchronised, the device synchronised, memory allocated, freed and recorded on a stream.
//
// Listeners installed at once: the stream sanitizer, the profiler's runtime-API recorder and multi-stream graph
// capture (graphs/CaptureStreams.h).
// Off unless one is installed; while off, every point costs one relaxed atomic load. Streams are
// identified by their native handles (torch.npu.Stream.npu_stream), events by their addresses.
#pragma once

#include <c10/macros/Macros.h>

#include <atomic>
#include <cstdint>

namespace vnpu::trace {

// In this order: torch_npu.utils._npu_trace numbers its callback lists the same way.
enum class Point : int {
  EventCreation,
  EventDeletion,
  EventRecord,  // (event, stream)
  EventWait,    // (event, stream)
  MemoryAllocation,
  MemoryDeallocation,
  StreamCreation,
  DeviceSynchronization,
  StreamSynchronization,
  EventSynchronization,
  RecordStream,  // (memory, stream): Tensor.record_stream
};

using Handler = void (*)(Point point, uintptr_t first, uintptr_t second);

enum class Listener : int { Sanitizer, Profiler, GraphCapture };

extern std::atomic<int> g_listening;  // one bit per installed listener

void set_handler(Listener listener, Handler handler);  // nullptr removes the listener
void dispatch(Point point, uintptr_t first, uintptr_t second);

// Whether any listener is installed: lets a caller skip computing a point's arguments.
inline bool active() {
  return C10_UNLIKELY(g_listening.load(std::memory_order_relaxed) != 0);
}

inline void fire(Point point, uintptr_t first = 0, uintptr_t second = 0) {
  if (active()) {
    dispatch(point, first, second);
  }
}

inline void fire(Point point, const void* first, const void* second = nullptr) {
  fire(point, reinterpret_cast<uintptr_t>(first), reinterpret_cast<uintptr_t>(second));
}

}  // namespace vnpu::trace
