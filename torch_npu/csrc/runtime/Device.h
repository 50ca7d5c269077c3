// Virtual NPU devices: how many there are, which physical ids they map to, and the
// calling thread's current device.
#pragma once

#include <c10/core/Device.h>

#include <atomic>
#include <cstdint>

#include <string>
#include <vector>

namespace vnpu {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;
constexpr int kMaxDevices = 64;

// Number of visible devices: VNPU_DEVICE_COUNT physical devices (default 8) filtered by
// ASCEND_RT_VISIBLE_DEVICES with torch_npu's rules. Never throws; an invalid environment yields
// zero devices and is reported by device_config_error().
c10::DeviceIndex read_device_count() noexcept;
// The count once the table is fixed (fix_device_table), else 0: read by the inline checks, which take the full
// path while it is 0.
extern std::atomic<c10::DeviceIndex> g_fixed_device_count;
inline c10::DeviceIndex device_count() noexcept {
  const c10::DeviceIndex fixed = g_fixed_device_count.load(std::memory_order_relaxed);
  return fixed > 0 ? fixed : read_device_count();
}

// Empty when the device environment is valid, otherwise a message naming the bad variable.
const std::string& device_config_error();

// Physical id of a visible device (what ASCEND_RT_VISIBLE_DEVICES selected).
int physical_device_id(c10::DeviceIndex index);

// Thread-local current device, like CUDA's: a new thread starts on device 0.
c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex index);
c10::DeviceIndex exchange_device(c10::DeviceIndex index);
void set_device_unchecked(c10::DeviceIndex index) noexcept;

// Whether a device has its runtime context, as aclrtSetDevice creates it on the card: from the first time the
// device is made current, memory is allocated on it or a kernel runs there. torch_npu's hasPrimaryContext
// answers this; the autograd engine stashes and restores the current streams of these devices only.
extern std::atomic<uint64_t> g_device_contexts;  // bit i: npu:i has a context
inline bool has_device_context(c10::DeviceIndex index) noexcept {
  return index >= 0 && index < 64 && (g_device_contexts.load(std::memory_order_relaxed) & (uint64_t(1) << index)) != 0;
}
inline void note_device_context(c10::DeviceIndex index) noexcept {
  if (C10_UNLIKELY(index >= 0 && index < 64 && !has_device_context(index))) {
    g_device_contexts.fetch_or(uint64_t(1) << index);
  }
}

// Throws torch_npu-style "Invalid device" errors for indices outside [0, device_count()).
void check_device_index_slow(c10::DeviceIndex index);
inline void check_device_index(c10::DeviceIndex index) {
  if (C10_UNLIKELY(index < 0 || index >= g_fixed_device_count.load(std::memory_order_relaxed))) {
    check_device_index_slow(index);
  }
}

// Fixes the device table (the visible devices) as the runtime initialises; before that it follows
// VNPU_DEVICE_COUNT and ASCEND_RT_VISIBLE_DEVICES.
void fix_device_table();
// After the device is initialised, a child created by fork() cannot use it (as on Ascend):
// every npu operation there raises torch_npu's "Cannot re-initialize NPU in forked subprocess".
void mark_device_initialized();
void check_not_in_bad_fork();
extern bool g_in_bad_fork;

// torch_npu.npu.stop_device / restart_device: a stopped device refuses every operation.
void set_device_stopped(c10::DeviceIndex index, bool stopped);
extern std::atomic<uint64_t> g_stopped_devices;  // bit i: npu:i is stopped
void check_device_running(c10::DeviceIndex index);

}  // namespace vnpu
