// The per-device state of the caching allocator, shared by its translation units
// (CachingAllocator.cpp: allocation and freeing; MemoryPools.cpp: pools, fractions, snapshots).
#pragma once

#include "runtime/BlockPool.h"

#include <c10/core/CachingDeviceAllocator.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>

namespace vnpu {

// Free blocks of one memory pool: the default pool (id 0) or a torch.npu.MemPool.
struct PoolLists {
  SmallFreeLists small;
  LargeFreeSet large;
};

struct DeviceState {
  SpinLock lock;
  PoolLists default_pool;
  std::map<uint64_t, PoolLists> mem_pools;
  std::set<uint64_t> released_pools;  // MemPools whose Python object is gone
  BlockRecords records;
  std::map<uintptr_t, Block*> segments;  // first block of each segment, by address
  c10::CachingDeviceAllocator::DeviceStats stats;
  bool peaks_pending = false;  // a CPU kernel's blocks raised current statistics but not yet their peaks
  double fraction = -1;        // < 0: not set, use the configured per_process_memory_fraction

  PoolLists& lists(uint64_t pool) {
    return pool == 0 ? default_pool : mem_pools[pool];
  }
  void insert_free(Block* b) {
    auto& l = lists(b->pool);
    if (b->small) {
      l.small.insert(b);
    } else {
      l.large.insert(b);
    }
  }
  void erase_free(Block* b) {
    auto& l = lists(b->pool);
    if (b->small) {
      l.small.erase(b);
    } else {
      l.large.erase(b);
    }
  }
};

using Guard = std::lock_guard<SpinLock>;

DeviceState* make_device_states();
inline DeviceState& device_state(c10::DeviceIndex device) {
  static DeviceState* const states = make_device_states();  // never destroyed
  return states[device];
}
// The aggregate current value of a statistic.
int64_t current(const c10::CachingAllocator::StatArray& stat);
// Bytes this process may reserve on the device (capacity x memory fraction).
int64_t allowed_bytes(const DeviceState& st);
// Allocator events queued by any thread and not yet logged.
extern std::atomic<int64_t> g_pending_events;
void log_pending_events();
// Logs the allocator events this thread queued (call without holding a device lock).
inline void flush_events() {
  if (C10_UNLIKELY(g_pending_events.load(std::memory_order_relaxed) != 0)) {
    log_pending_events();
  }
}

// Takes the peaks a CPU kernel's blocks left pending (see pool_allocate_block).
void settle_peaks(DeviceState& st);
// Returns the cached segments that hold no allocation to the host (see CachingAllocator.cpp).
void release_free_segments(DeviceState& st, bool every_pool = false);
// How many (thread, device) entries route allocations to a MemPool (while none does, no thread-local is read).
extern std::atomic<int> g_mem_pool_routes;
uint64_t thread_pool_entry(c10::DeviceIndex device);
// The MemPool this thread allocates from on `device` (0: the default pool); no index check.
inline uint64_t current_thread_pool(c10::DeviceIndex device) {
  return g_mem_pool_routes.load(std::memory_order_relaxed) == 0 ? 0 : thread_pool_entry(device);
}
// Moves a statistic's aggregate and its pool's entry by `delta`.
inline void update_stat(c10::CachingAllocator::StatArray& stat, bool small, int64_t delta) {
  using c10::CachingAllocator::StatType;
  const size_t pool = static_cast<size_t>(small ? StatType::SMALL_POOL : StatType::LARGE_POOL);
  for (size_t i : {static_cast<size_t>(StatType::AGGREGATE), pool}) {
    if (delta >= 0) {
      stat[i].increase(static_cast<size_t>(delta));
    } else {
      stat[i].decrease(static_cast<size_t>(-delta));
    }
  }
}
// Raises torch_npu's out-of-memory error for a request of `requested` bytes (see CachingAllocator.cpp).
[[noreturn]] void throw_oom(DeviceState& st, c10::DeviceIndex device, size_t requested, const std::string& host_note);

}  // namespace vnpu
