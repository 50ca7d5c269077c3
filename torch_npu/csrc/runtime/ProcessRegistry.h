// What `npu-smi` reads: each process that holds npu memory publishes, in a small shared-memory entry
// (/dev/shm/vnpu-smi.<pid>), its name, the device memory it has reserved on each device, and whether
// each device is running an operator right now. The entry is removed when the process exits;
// `npu-smi` removes the entries of processes that were killed. Reserved memory is updated when the
// caching allocator maps or unmaps a segment (never per allocation); the busy flags are one relaxed
// byte store when an operator's kernel starts and one when it ends, and npu-smi samples them to show
// the AI Core usage (the fraction of samples in which the device was busy).
#pragma once

#include <c10/core/Device.h>

#include <atomic>
#include <cstdint>

namespace vnpu {

inline constexpr int kRegistryDevices = 64;

// Layout of an entry (vnpu/npu_smi.py reads it with struct; keep both in step).
struct RegistryEntry {
  char magic[8];  // "VNPUSMI2"
  int64_t pid;
  int64_t start_time;                  // the process's start time in clock ticks since boot (/proc/<pid>/stat field 22)
  char name[64];                       // the process's command name
  char soc[32];                        // the SoC the process's devices model
  int64_t capacity;                    // bytes of memory of each device
  int64_t reserved[kRegistryDevices];  // by physical device id
  uint8_t busy[kRegistryDevices];      // by physical device id: 1 while a kernel of this process runs there
};

// Where each visible device's busy flag is in this process's entry (null before it has one).
extern std::atomic<uint8_t>* g_busy_flags[kRegistryDevices];

// Marks visible device `device` busy (a kernel started) or idle (it ended). Threads running kernels on
// one device at once share the flag: the last to end clears it (npu-smi's usage is a sample, not a sum).
inline void mark_device_busy(c10::DeviceIndex device, bool busy) {
  if (device >= 0 && device < kRegistryDevices) {
    std::atomic<uint8_t>* flag = g_busy_flags[device];
    if (flag != nullptr) {
      flag->store(busy ? 1 : 0, std::memory_order_relaxed);
    }
  }
}

// Publishes the bytes visible device `device` now has reserved by this process.
void publish_reserved(c10::DeviceIndex device, int64_t reserved_bytes);

}  // namespace vnpu
