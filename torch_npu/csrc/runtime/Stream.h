// Logical npu streams with torch_npu's stream ids, and timestamp events.
//
// The virtual device executes each operator synchronously on the calling thread, so every
// stream is always idle: queries return true and synchronisation returns at once. Streams still
// have identities (ids, priorities, raw handles) and a thread-local current stream per device.
//
// Stream id layout (torch_npu's): bits 0-4 are the index in the per-device pool, the bits above
// are the type: 0 default, 1 secondary, 2 sync-launch (4 per device), 3 normal priority, 4 high
// priority, 5 external (a raw stream made outside torch_npu, see ExternalStream.h).
#pragma once

#include <c10/core/Stream.h>

#include <cstdint>

namespace vnpu {

enum class StreamType : int { Default = 0, Secondary = 1, SyncLaunch = 2, Normal = 3, High = 4, External = 5 };
constexpr int kStreamIdTypeShift = 5;

int streams_per_device();  // STREAMS_PER_DEVICE: 8 or 32 (default 32)

c10::Stream default_stream(c10::DeviceIndex device);
c10::Stream current_stream(c10::DeviceIndex device);
c10::Stream exchange_stream(c10::Stream stream);
// A stream from the pool of `device`, round robin, high priority when priority < 0.
c10::Stream pool_stream(c10::DeviceIndex device, int priority);
c10::Stream make_stream(c10::StreamId id, c10::DeviceIndex device);  // validates the id
// torch.npu.Stream(stream_id=, device_index=, device_type=): validates all three.
c10::Stream stream_from_parts(int64_t id, int64_t device_index, int64_t device_type);
// A stream of the given type's pool (secondary, sync-launch, external slots), round robin.
c10::Stream typed_pool_stream(c10::DeviceIndex device, StreamType type);
int stream_priority(c10::Stream stream);
void* stream_native_handle(c10::Stream stream);

// Host nanoseconds at which an npu event (torch.Event event_id) was last recorded.
int64_t event_recorded_ns(uintptr_t event_id);
// Milliseconds between two recorded npu events (their torch.Event event_id values).
double event_elapsed_ms(uintptr_t start_id, uintptr_t end_id);

// Host time in nanoseconds, the clock events and the profiler use.
int64_t now_ns();

}  // namespace vnpu
