// Out-of-memory observers (torch_npu._C._npu_attach_out_of_memory_observer, torch._C's CUDA counterpart):
// called when a device allocation fails, before the OutOfMemoryError is raised -- the moment programs
// take a memory snapshot to see what filled the device.
#pragma once

#include <cstdint>
#include <functional>

namespace vnpu {

// (device, bytes asked for, bytes the process may use on the device, bytes free on it)
using OomObserver = std::function<void(int64_t device, int64_t alloc, int64_t device_total, int64_t device_free)>;

void attach_oom_observer(OomObserver observer);
// Calls every observer in the order attached. Called without any allocator lock held (observers may take a
// snapshot); an observer's exception replaces the OutOfMemoryError, as on CUDA.
void notify_oom_observers(int64_t device, int64_t alloc, int64_t device_total, int64_t device_free);

}  // namespace vnpu
