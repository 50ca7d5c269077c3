// What `npu-smi` reads: each process that holds npu memory publishes, in a small shared-memory entry
// (/dev/shm/vnpu-smi.<pid>), its name and the device memory it has reserved on each device. The
// entry is removed when the process exits; `npu-smi` removes the entries of processes that were
// killed. Updated when the caching allocator maps or unmaps a segment (never per allocation).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

namespace vnpu {

inline constexpr int kRegistryDevices = 64;

// Layout of an entry (vnpu/npu_smi.py reads it with struct; keep both in step).
struct RegistryEntry {
  char magic[8];  // "VNPUSMI1"
  int64_t pid;
  int64_t start_time;                  // the process's start time in clock ticks since boot (/proc/<pid>/stat field 22)
  char name[64];                       // the process's command name
  char soc[32];                        // the SoC the process's devices model
  int64_t capacity;                    // bytes of memory of each device
  int64_t reserved[kRegistryDevices];  // by physical device id
};

// Publishes the bytes visible device `device` now has reserved by this process.
void publish_reserved(c10::DeviceIndex device, int64_t reserved_bytes);

}  // namespace vnpu
