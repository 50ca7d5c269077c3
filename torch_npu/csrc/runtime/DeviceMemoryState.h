// The per-device state of the caching allocator, shared by its translation units
// (CachingAllocator.cpp: allocation and freeing; MemoryPools.cpp: pools, fractions, snapshots).
#pragma once

#include "runtime/BlockPool.h"

#include <c10/core/CachingDeviceAllocator.h>

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

DeviceState& device_state(c10::DeviceIndex device);
// The aggregate current value of a statistic.
int64_t current(const c10::CachingAllocator::StatArray& stat);
// Bytes this process may reserve on the device (capacity x memory fraction).
int64_t allowed_bytes(const DeviceState& st);
// Logs the allocator events this thread queued (call without holding a device lock).
void flush_events();

// Takes the peaks a CPU kernel's blocks left pending (see pool_allocate_block).
void settle_peaks(DeviceState& st);
// Returns the cached segments that hold no allocation to the host (see CachingAllocator.cpp).
void release_free_segments(DeviceState& st, bool every_pool = false);
// The MemPool this thread allocates from on `device` (0: the default pool); no index check.
uint64_t current_thread_pool(c10::DeviceIndex device);
// Moves a statistic's aggregate and its pool's entry by `delta`.
void update_stat(c10::CachingAllocator::StatArray& stat, bool small, int64_t delta);
// Raises torch_npu's out-of-memory error for a request of `requested` bytes (see CachingAllocator.cpp).
[[noreturn]] void throw_oom(DeviceState& st, c10::DeviceIndex device, size_t requested, const std::string& host_note);

}  // namespace vnpu
