// Operators that make the host wait for the device (reading device memory on the host):
// refused during graph capture, reported by torch.npu.set_sync_debug_mode.
#pragma once

#include "aten/OpHooks.h"
#include "runtime/DeviceTrace.h"
#include "runtime/Stream.h"

#include <string>
#include <vector>

namespace vnpu {

// Operators whose result the host reads from device memory (a nonzero count, a comparison...): on the
// card they wait for their stream. _local_scalar_dense and the copies are told apart by the redirect.
bool reads_device_memory_on_host(const std::string& name);

// The host waits for the current stream of `device` (aclrtSynchronizeStream on the card: after a
// blocking copy between host and device memory, or before reading a result): the runtime's trace point
// tells the stream sanitizer and the profiler's CANN level. One relaxed load when nothing listens.
inline void host_waits_for_stream(c10::DeviceIndex device) {
  if (trace::active()) {
    trace::fire(trace::Point::StreamSynchronization, stream_native_handle(current_stream(device)));
  }
}

// Why the operator synchronises, or empty when it does not.
std::string host_sync_reason(const c10::OperatorHandle& op, const std::vector<c10::IValue>& inputs);

// torch.npu.set_sync_debug_mode: 0 default (silent), 1 warn, 2 error.
void set_sync_debug_mode(int mode);
int sync_debug_mode();

}  // namespace vnpu
