#include "runtime/CachingAllocator.h"

#include "plan/PlanMemory.h"
#include "runtime/AllocatorConfig.h"
#include "runtime/BlockPool.h"
#include "runtime/CachingAllocatorInternal.h"
#include "runtime/Device.h"
#include "runtime/DeviceMemoryState.h"
#include "runtime/DeviceTrace.h"
#include "runtime/ErrorCode.h"
#include "runtime/HostMemory.h"
#include "runtime/MemoryHistory.h"
#include "runtime/OomObservers.h"
#include "runtime/PluggableAllocator.h"
#include "runtime/ProcessRegistry.h"
#include "runtime/ProfilerMemory.h"
#include "runtime/SocProfile.h"
#include "runtime/Stream.h"

#include <c10/util/Exception.h>
#include <c10/util/llvmMathExtras.h>

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

namespace vnpu {

std::recursive_mutex& free_mutex() {
  static std::recursive_mutex mutex;
  return mutex;
}

namespace {

using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr size_t kMinLargeAlloc = size_t(10) << 20;  // below 10 MiB, large blocks share a segment
constexpr size_t kRoundLarge = size_t(2) << 20;      // larger segments round up to 2 MiB
constexpr size_t kPadBytes = 32;                     // torch_npu pads every request by 32 bytes on pre-950 SoCs
constexpr uint64_t kOneEB = uint64_t(1) << 60;

// Allocator events waiting to be logged once the device lock is released (logging a stack may
// take the GIL, which must never happen under the lock).
struct PendingEvent {
  const char* action;
  c10::DeviceIndex device;
  uintptr_t address;
  size_t size;
};
thread_local std::vector<PendingEvent> tl_pending;

[[gnu::cold]] [[gnu::noinline]] void queue_event(const char* action, c10::DeviceIndex device, const void* address,
                                                 size_t size) {
  tl_pending.push_back({action, device, reinterpret_cast<uintptr_t>(address), size});
  g_pending_events.fetch_add(1, std::memory_order_relaxed);
}

void note(const char* action, c10::DeviceIndex device, const void* address, size_t size) {
  if (C10_UNLIKELY(memory_history_enabled())) {
    queue_event(action, device, address, size);
  }
}

std::atomic<int64_t> g_host_mapped{0};  // bytes of segments mapped for all devices

// The statistics a block allocation raises: their peaks wait for an operator boundary when the block is
// a CPU kernel's (see pool_allocate_block).
constexpr StatArray DeviceStats::* kBlockStats[] = {&DeviceStats::allocation, &DeviceStats::allocated_bytes,
                                                    &DeviceStats::active, &DeviceStats::active_bytes,
                                                    &DeviceStats::requested_bytes};

// Moves one statistic by `amount` up (`sign` 1, taking its peak when kPeak) or down (-1).
template <int sign, bool kPeak>
void move_stat(c10::CachingAllocator::Stat& stat, int64_t amount) {
  if constexpr (sign < 0) {
    stat.decrease(static_cast<size_t>(amount));
  } else if constexpr (kPeak) {
    stat.increase(static_cast<size_t>(amount));
  } else {  // a CPU kernel's block: the peak waits for the next operator boundary
    stat.current += amount;
    stat.allocated += amount;
  }
}

// Counts a block in use (`sign` 1) or no longer in use (-1) in the statistics of kBlockStats, in the aggregate and
// the block's pool. Taking the peaks is optional on the way up (see pool_allocate_block); straight-line code, as
// every allocation and free of an npu tensor runs it.
template <int sign, bool kPeaks = true>
void count_block(DeviceStats& s, bool small, int64_t size, int64_t requested) {
  static_assert(sign == 1 || sign == -1);
  const size_t pool = static_cast<size_t>(small ? StatType::SMALL_POOL : StatType::LARGE_POOL);
  for (size_t i : {static_cast<size_t>(StatType::AGGREGATE), pool}) {
    move_stat<sign, kPeaks>(s.allocation[i], 1);
    move_stat<sign, kPeaks>(s.allocated_bytes[i], size);
    move_stat<sign, kPeaks>(s.active[i], 1);
    move_stat<sign, kPeaks>(s.active_bytes[i], size);
    move_stat<sign, kPeaks>(s.requested_bytes[i], requested);
  }
}

// Counts a block taken for use: its statistics and, when it is oversize, the oversize allocations.
template <bool kPeaks>
void count_taken(DeviceStats& s, const Block& block, int64_t requested, bool oversize) {
  count_block<1, kPeaks>(s, block.small, static_cast<int64_t>(block.size), requested);
  if (oversize) {
    move_stat<1, kPeaks>(s.oversize_allocations, 1);
  }
}

size_t round_size(size_t requested, const AllocatorConfig& config) {
  const size_t size = requested + kPadBytes;
  if (size < kMinBlockSize) {
    return kMinBlockSize;
  }
  const size_t divisions = roundup_power2_divisions(config, size);
  if (divisions > 1 && size > kMinBlockSize * divisions) {
    // round up to the nearest of `divisions` equal steps between two powers of two
    const size_t power2_floor = size_t(1) << (63 - c10::llvm::countLeadingZeros(static_cast<uint64_t>(size)));
    const size_t step = std::max(power2_floor / divisions, kMinBlockSize);
    return (size + step - 1) / step * step;
  }
  return (size + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

size_t segment_size_for(size_t size, const AllocatorConfig& config) {
  if (size <= kSmallSize) {
    return kSmallBuffer;
  }
  if (size < kMinLargeAlloc) {
    return config.large_segment_size;
  }
  return (size + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

// Maps a new segment for `device` if its capacity (and the host) can back it.
Block* map_segment(DeviceState& st, c10::DeviceIndex device, size_t bytes, bool small, uint64_t pool,
                   std::string& host_note, bool beyond_capacity = false) {
  if (current(st.stats.reserved_bytes) + static_cast<int64_t>(bytes) > allowed_bytes(st) && !beyond_capacity) {
    return nullptr;
  }
  if (!plan_mode() && !host_can_back(bytes, static_cast<size_t>(g_host_mapped.load()), host_note)) {
    return nullptr;
  }
  void* ptr = map_segment_memory(bytes);
  if (ptr == nullptr) {
    host_note = " [vnpu] The host refused to map " + format_size(bytes) +
                " of memory to back this device allocation (every npu byte lives in host memory).";
    return nullptr;
  }
  g_host_mapped += static_cast<int64_t>(bytes);
  Block* block = st.records.make(static_cast<char*>(ptr), bytes, device, small);
  block->pool = pool;
  st.segments.emplace(reinterpret_cast<uintptr_t>(ptr), block);
  note("segment_alloc", device, ptr, bytes);
  st.stats.num_device_alloc++;
  update_stat(st.stats.segment, small, 1);
  update_stat(st.stats.reserved_bytes, small, static_cast<int64_t>(bytes));
  if (bytes >= allocator_config().max_split_size) {
    st.stats.oversize_segments.increase(1);
  }
  publish_reserved(device, current(st.stats.reserved_bytes));
  return block;
}

void unmap_segment(DeviceState& st, Block* block) {
  note("segment_free", block->device, block->ptr, block->size);
  st.segments.erase(reinterpret_cast<uintptr_t>(block->ptr));
  st.stats.num_device_free++;
  update_stat(st.stats.segment, block->small, -1);
  update_stat(st.stats.reserved_bytes, block->small, -static_cast<int64_t>(block->size));
  if (block->size >= allocator_config().max_split_size) {
    st.stats.oversize_segments.decrease(1);
  }
  if (C10_UNLIKELY(profiler_memory_on())) {  // reserved went down with no block event
    record_profiler_memory(reinterpret_cast<int64_t>(block->ptr), 0, current(st.stats.allocated_bytes),
                           current(st.stats.reserved_bytes), current(st.stats.active_bytes), block->device,
                           current_stream(block->device).id());
  }
  unmap_segment_memory(block->ptr, block->size);
  g_host_mapped -= static_cast<int64_t>(block->size);
  publish_reserved(block->device, current(st.stats.reserved_bytes));
  st.records.recycle(block);
}

Block* take_free_block(DeviceState& st, bool small, uint64_t pool, size_t size, const AllocatorConfig& config) {
  auto& lists = st.lists(pool);
  Block* block = small ? lists.small.best(size) : lists.large.best(size);
  if (block == nullptr) {
    return nullptr;
  }
  // Do not hand out oversize blocks for requests that could be split from smaller ones, nor
  // blocks much larger than an oversize request.
  if (size < config.max_split_size && block->size >= config.max_split_size) {
    return nullptr;
  }
  if (size >= config.max_split_size && block->size >= size + config.max_non_split_rounding_size) {
    return nullptr;
  }
  st.erase_free(block);
  return block;
}

bool should_split(const Block* block, size_t size, const AllocatorConfig& config) {
  const size_t remaining = block->size - size;
  if (block->small) {
    return remaining >= kMinBlockSize;
  }
  return size < config.max_split_size && remaining > kSmallSize;
}

}  // namespace

// Shared with NpuDeviceAllocator.cpp (declared in DeviceMemoryState.h).
void settle_peaks(DeviceState& st) {
  if (!st.peaks_pending) {
    return;
  }
  for (auto member : kBlockStats) {
    for (auto& stat : st.stats.*member) {
      stat.peak = std::max(stat.peak, stat.current);
    }
  }
  auto& oversize = st.stats.oversize_allocations;
  oversize.peak = std::max(oversize.peak, oversize.current);
  st.peaks_pending = false;
}

void throw_oom(DeviceState& st, c10::DeviceIndex device, size_t requested, const std::string& host_note) {
  st.stats.num_ooms++;
  const int64_t capacity = device_capacity();
  const int64_t reserved = current(st.stats.reserved_bytes);
  const int64_t allowed = allowed_bytes(st);
  const std::string allowed_info = allowed < capacity ? format_size(static_cast<uint64_t>(allowed)) + " allowed; " : "";
  if (c10::memoryProfilingEnabled()) {
    c10::reportOutOfMemoryToProfiler(static_cast<int64_t>(requested),
                                     static_cast<size_t>(current(st.stats.allocated_bytes)),
                                     static_cast<size_t>(reserved), c10::Device(kNpu, device));
  }
  TORCH_CHECK_WITH(OutOfMemoryError, false, "NPU out of memory. Tried to allocate ", format_size(requested), " (NPU ",
                   static_cast<int>(device), "; ", format_size(static_cast<uint64_t>(capacity)), " total capacity; ",
                   format_size(static_cast<uint64_t>(current(st.stats.allocated_bytes))), " already allocated; ",
                   format_size(static_cast<uint64_t>(current(st.stats.active_bytes))), " current active; ",
                   format_size(static_cast<uint64_t>(std::max<int64_t>(capacity - reserved, 0))), " free; ",
                   allowed_info, format_size(static_cast<uint64_t>(reserved)),
                   " reserved in total by PyTorch) If reserved memory is >> allocated memory try setting "
                   "max_split_size_mb to avoid fragmentation.",
                   host_note);
}

Block* take_block(DeviceState& st, Block* block, size_t size, size_t requested, bool split, bool for_kernel) {
  const auto& config = allocator_config();
  const bool small = block->small;
  const c10::DeviceIndex device = block->device;
  const bool already_split = block->is_split();
  if (split) {
    Block* rest = st.records.make(block->ptr + size, block->size - size, device, small);
    rest->pool = block->pool;
    rest->prev = block;
    rest->next = block->next;
    if (rest->next != nullptr) {
      rest->next->prev = rest;
    }
    block->next = rest;
    block->size = size;
    st.insert_free(rest);
    if (already_split) {
      update_stat(st.stats.inactive_split_bytes, small, -static_cast<int64_t>(size));
    } else {
      update_stat(st.stats.inactive_split_bytes, small, static_cast<int64_t>(rest->size));
      update_stat(st.stats.inactive_split, small, 1);
    }
  } else if (already_split) {
    update_stat(st.stats.inactive_split_bytes, small, -static_cast<int64_t>(block->size));
    update_stat(st.stats.inactive_split, small, -1);
  }
  block->allocated = true;
  block->requested = requested;
  block->npu_format = -1;
  block->storage_numel = -1;
  block->base_dtype = c10::ScalarType::Undefined;
  const bool oversize = block->size >= config.max_split_size;
  if (for_kernel) {
    count_taken</*kPeaks=*/false>(st.stats, *block, static_cast<int64_t>(requested), oversize);
  } else {
    count_taken</*kPeaks=*/true>(st.stats, *block, static_cast<int64_t>(requested), oversize);
  }
  st.peaks_pending = st.peaks_pending || for_kernel;
  return block;
}

namespace {

// Under a device lock the free mutex can only be tried: its holder may be waiting for that lock.
void release_free_segments_unless_held(DeviceState& st) {
  std::unique_lock<std::recursive_mutex> releasing(free_mutex(), std::try_to_lock);
  if (releasing.owns_lock()) {
    release_free_segments(st);
  }
}

// No cached block fits: a new segment (after the garbage collection threshold's release, and once more after
// releasing the cache), or the out-of-memory error. Out of line: the cached path is what runs per operator.
[[gnu::cold]] [[gnu::noinline]] Block* map_new_block(DeviceState& st, c10::DeviceIndex device, size_t requested,
                                                     size_t size, bool small, uint64_t pool,
                                                     const AllocatorConfig& config) {
  if (config.garbage_collection_threshold > 0 &&
      current(st.stats.reserved_bytes) > config.garbage_collection_threshold * allowed_bytes(st)) {
    release_free_segments_unless_held(st);
  }
  std::string host_note;
  const size_t bytes = config.caching ? segment_size_for(size, config) : size;
  Block* block = map_segment(st, device, bytes, small, pool, host_note);
  if (block == nullptr) {
    release_free_segments_unless_held(st);
    st.stats.num_alloc_retries++;
    host_note.clear();
    block = map_segment(st, device, bytes, small, pool, host_note);
  }
  if (block == nullptr && plan_over_capacity() && host_note.empty()) {
    block = map_segment(st, device, bytes, small, pool, host_note, /*beyond_capacity=*/true);
    if (block != nullptr) {
      record_plan_over_capacity(device, static_cast<int64_t>(requested), allowed_bytes(st));
    }
  }
  if (block == nullptr) {
    note("oom", device, nullptr, requested);
    throw_oom(st, device, requested, host_note);
  }
  return block;
}

Block* allocate_block(DeviceState& st, c10::DeviceIndex device, size_t requested, uint64_t pool, bool for_kernel) {
  const auto& config = allocator_config();
  if (!for_kernel) {
    settle_peaks(st);
  }
  const size_t size = round_size(requested, config);
  const bool small = size <= kSmallSize;
  Block* block = config.caching ? take_free_block(st, small, pool, size, config) : nullptr;
  if (C10_UNLIKELY(block == nullptr)) {
    block = map_new_block(st, device, requested, size, small, pool, config);
  }
  return take_block(st, block, size, requested, config.caching && should_split(block, size, config), for_kernel);
}

[[gnu::cold]] [[gnu::noinline]] void report_to_profilers(const Block* block, int64_t delta, DeviceState& st) {
  if (profiler_memory_on()) {
    record_profiler_memory(reinterpret_cast<int64_t>(block->ptr), delta, current(st.stats.allocated_bytes),
                           current(st.stats.reserved_bytes), current(st.stats.active_bytes), block->device,
                           current_stream(block->device).id());
  }
  if (plan_mode()) {
    record_plan_memory(reinterpret_cast<int64_t>(block->ptr), delta, current(st.stats.allocated_bytes),
                       current(st.stats.reserved_bytes), block->device);
  }
  if (c10::memoryProfilingEnabled()) {
    c10::reportMemoryUsageToProfiler(block->ptr, delta, static_cast<size_t>(current(st.stats.allocated_bytes)),
                                     static_cast<size_t>(current(st.stats.reserved_bytes)),
                                     c10::Device(kNpu, block->device));
  }
}

// Tells vnpu's profiler, the planning ledger and PyTorch's profiler of a block allocated (delta > 0) or freed.
void report_to_profiler(const Block* block, int64_t delta, DeviceState& st) {
  if (C10_UNLIKELY(profiler_memory_on() || plan_mode() || c10::memoryProfilingEnabled())) {
    report_to_profilers(block, delta, st);
  }
}

}  // namespace

// Shared with MemoryPools.cpp (declared in DeviceMemoryState.h).
DeviceState* make_device_states() {
  return new DeviceState[kMaxDevices];
}

int64_t current(const StatArray& stat) {
  return stat[static_cast<size_t>(StatType::AGGREGATE)].current;
}

int64_t allowed_bytes(const DeviceState& st) {
  const double fraction = st.fraction >= 0 ? st.fraction : allocator_config().per_process_memory_fraction;
  return static_cast<int64_t>(fraction * static_cast<double>(device_capacity()));
}

std::atomic<int64_t> g_pending_events{0};

void log_pending_events() {
  if (!tl_pending.empty()) {
    std::vector<PendingEvent> events;
    events.swap(tl_pending);
    g_pending_events.fetch_sub(static_cast<int64_t>(events.size()), std::memory_order_relaxed);
    for (const auto& e : events) {
      record_memory_event(e.action, e.device, e.address, e.size);
    }
  }
}

// Returns the cached segments that hold no allocation to the host: those of the default pool and
// of released MemPools (a live MemPool keeps its memory, as in PyTorch), or of every pool.
void release_free_segments(DeviceState& st, bool every_pool) {
  auto release = [&](Block* b) {
    if (!b->is_split()) {
      st.erase_free(b);
      unmap_segment(st, b);
    }
  };
  auto release_pool = [&](PoolLists& l) {
    l.small.for_each(release);
    l.large.for_each(release);
  };
  release_pool(st.default_pool);
  for (auto& [id, lists] : st.mem_pools) {
    if (every_pool || st.released_pools.count(id) > 0) {
      release_pool(lists);
    }
  }
}

std::atomic<bool> g_npu_memory_used{false};

namespace {

// Returns a block to its pool; `settle` takes the peaks CPU kernels left pending first.
[[gnu::cold]] [[gnu::noinline]] void free_pluggable(Block* block) {
  active_pluggable_allocator()->free(block->ptr, static_cast<ptrdiff_t>(block->size), block->device, nullptr);
  delete block;
}

[[gnu::cold]] [[gnu::noinline]] void record_free(const Block* block) {
  record_memory_event("free_requested", block->device, reinterpret_cast<uintptr_t>(block->ptr), block->size);
  record_memory_event("free_completed", block->device, reinterpret_cast<uintptr_t>(block->ptr), block->size);
}

void release_block(Block* block, bool settle) {
  trace::fire(trace::Point::MemoryDeallocation, block->ptr);
  if (C10_UNLIKELY(block->pluggable)) {
    free_pluggable(block);
    return;
  }
  if (C10_UNLIKELY(memory_history_enabled())) {
    record_free(block);
  }
  DeviceState& st = device_state(block->device);
  std::unique_lock<std::recursive_mutex> releasing(free_mutex(), std::defer_lock);
  if (!allocator_config().caching) {  // the block's segment goes back to the host
    releasing.lock();
  }
  std::unique_lock<SpinLock> guard(st.lock);
  free_block_locked(st, block, settle);
  guard.unlock();
  flush_events();
}

}  // namespace

void free_block(void* ctx) {
  release_block(static_cast<Block*>(ctx), /*settle=*/true);
}

void free_kernel_block(Block* block) {
  release_block(block, /*settle=*/false);
}

void free_block_locked(DeviceState& st, Block* block, bool settle) {
  const auto& config = allocator_config();
  if (settle) {
    settle_peaks(st);
  }
  const bool small = block->small;
  const auto size = static_cast<int64_t>(block->size);
  count_block<-1>(st.stats, small, size, static_cast<int64_t>(block->requested));
  if (block->size >= config.max_split_size) {
    st.stats.oversize_allocations.decrease(1);
  }
  block->allocated = false;
  block->requested = 0;
  report_to_profiler(block, -size, st);
  if (!config.caching) {
    unmap_segment(st, block);
    return;
  }
  int64_t split_blocks = 0;
  int64_t split_bytes = 0;
  if (block->next != nullptr && !block->next->allocated) {
    Block* next = block->next;
    st.erase_free(next);
    split_blocks -= 1;
    split_bytes -= static_cast<int64_t>(next->size);
    block->size += next->size;
    block->next = next->next;
    if (block->next != nullptr) {
      block->next->prev = block;
    }
    st.records.recycle(next);
  }
  if (block->prev != nullptr && !block->prev->allocated) {
    Block* prev = block->prev;
    st.erase_free(prev);
    split_blocks -= 1;
    split_bytes -= static_cast<int64_t>(prev->size);
    prev->size += block->size;
    prev->next = block->next;
    if (prev->next != nullptr) {
      prev->next->prev = prev;
    }
    st.records.recycle(block);
    block = prev;
  }
  st.insert_free(block);
  if (block->is_split()) {
    split_blocks += 1;
    split_bytes += static_cast<int64_t>(block->size);
  }
  update_stat(st.stats.inactive_split, small, split_blocks);
  update_stat(st.stats.inactive_split_bytes, small, split_bytes);
}

namespace {

// A block of a user's NPUPluggableAllocator (outside the pools).
[[gnu::cold]] [[gnu::noinline]] Block* allocate_pluggable(const PluggableFunctions& pluggable, size_t bytes,
                                                          c10::DeviceIndex device) {
  void* ptr = pluggable.alloc(static_cast<ptrdiff_t>(bytes), device, nullptr);
  TORCH_CHECK_WITH(OutOfMemoryError, ptr != nullptr, "NPU out of memory. Tried to allocate ", format_size(bytes),
                   " (NPU ", static_cast<int>(device), "): the NPUPluggableAllocator ", pluggable.path,
                   " returned no memory");
  auto* block = new Block();
  block->ptr = static_cast<char*>(ptr);
  block->size = bytes;
  block->device = device;
  block->allocated = true;
  block->pluggable = true;
  trace::fire(trace::Point::MemoryAllocation, block->ptr);
  return block;
}

// The checks and one-time steps of a process's first allocation (and of every one in a forked child).
[[gnu::cold]] [[gnu::noinline]] void before_first_allocation(size_t bytes) {
  if (g_in_bad_fork) {
    check_not_in_bad_fork();
  }
  TORCH_CHECK_WITH(OutOfMemoryError, bytes < kOneEB, "NPU out of memory. Tried to allocate more than 1EB memory.");
  init_allocator();
  g_npu_memory_used.store(true);
}

[[gnu::cold]] [[gnu::noinline]] void after_oom(DeviceState& st, std::unique_lock<SpinLock>& guard,
                                               c10::DeviceIndex device, size_t bytes) {
  const int64_t total = allowed_bytes(st);
  const int64_t free = std::max<int64_t>(total - current(st.stats.reserved_bytes), 0);
  guard.unlock();
  flush_events();
  notify_oom_observers(device, static_cast<int64_t>(bytes), total, free);
}

}  // namespace

Block* pool_allocate_block(size_t bytes, c10::DeviceIndex device, bool for_kernel) {
  if (C10_UNLIKELY(g_in_bad_fork || bytes >= kOneEB || !g_npu_memory_used.load(std::memory_order_relaxed) ||
                   !g_allocator_initialized.load(std::memory_order_acquire))) {
    before_first_allocation(bytes);
  }
  if (const PluggableFunctions* pluggable = active_pluggable_allocator(); C10_UNLIKELY(pluggable != nullptr)) {
    return allocate_pluggable(*pluggable, bytes, device);
  }
  DeviceState& st = device_state(device);
  Block* block = nullptr;
  {
    std::unique_lock<SpinLock> guard(st.lock);
    try {
      block = allocate_block(st, device, bytes, current_thread_pool(device), for_kernel);
    } catch (const c10::OutOfMemoryError&) {
      after_oom(st, guard, device, bytes);
      throw;
    } catch (...) {
      guard.unlock();
      flush_events();
      throw;
    }
    report_to_profiler(block, static_cast<int64_t>(block->size), st);
    note("alloc", device, block->ptr, block->size);
  }
  flush_events();
  trace::fire(trace::Point::MemoryAllocation, block->ptr);
  return block;
}

}  // namespace vnpu
