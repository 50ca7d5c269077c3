// c10's DeviceAllocator for npu over the caching allocator (CachingAllocator.cpp): allocation for tensors made
// through torch, emptying the cache, the statistics queries (torch.npu.memory_stats and its resets) and the
// allocator's initialisation.
#include "runtime/CachingAllocator.h"

#include "runtime/AllocatorConfig.h"
#include "runtime/CachingAllocatorInternal.h"
#include "runtime/Device.h"
#include "runtime/DeviceMemoryState.h"
#include "runtime/DeviceTrace.h"
#include "runtime/ErrorCode.h"
#include "runtime/SocProfile.h"
#include "runtime/Stream.h"

#include <atomic>
#include <cstring>
#include <limits>

namespace vnpu {
namespace {

using c10::CachingAllocator::StatArray;
using c10::CachingDeviceAllocator::DeviceStats;

// The statistics calls check their device as torch_npu's caching allocator does (its text, not the runtime's).
void check_stats_device(c10::DeviceIndex device) {
  TORCH_CHECK(device >= 0 && device < device_count(), "Invalid device argument.",
              error_suffix(SubModule::kPta, kErrParam, "invalid parameter"));
}

void for_each_stat_array(DeviceStats& s, void (*fn)(c10::CachingAllocator::Stat&)) {
  for (StatArray* a : {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes, &s.reserved_bytes,
                       &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes}) {
    for (auto& stat : *a) {
      fn(stat);
    }
  }
  fn(s.oversize_allocations);
  fn(s.oversize_segments);
}

struct NpuAllocator final : c10::DeviceAllocator {
  c10::DataPtr allocate(size_t bytes) override {
    const auto device = current_device();
    note_device_context(device);
    if (bytes == 0) {
      return c10::DataPtr(nullptr, c10::Device(kNpu, device));
    }
    Block* block = pool_allocate_block(bytes, device);
    return c10::DataPtr(block->ptr, block, &free_block, c10::Device(kNpu, device));
  }
  c10::DeleterFnPtr raw_deleter() const override {
    return nullptr;  // the context (the block) differs from the data pointer
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
  bool initialized() override {
    return g_allocator_initialized.load();
  }
  void emptyCache(c10::MempoolId_t /*mempool_id*/) override {
    std::lock_guard<std::recursive_mutex> releasing(free_mutex());
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
      DeviceState& st = device_state(d);
      {
        Guard guard(st.lock);
        release_free_segments(st);
      }
      flush_events();
    }
  }
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    // Execution is synchronous: a block is never in use by another stream when it is freed. The trace point
    // tells the sanitizer, which models the card, that the block waits for `stream`.
    trace::fire(trace::Point::RecordStream, ptr.get(), stream_native_handle(stream));
  }
  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    check_stats_device(device);
    DeviceState& st = device_state(device);
    Guard guard(st.lock);
    settle_peaks(st);
    DeviceStats stats = st.stats;
    const auto max_split = allocator_config().max_split_size;
    stats.max_split_size = max_split == std::numeric_limits<size_t>::max() ? 0 : static_cast<int64_t>(max_split);
    return stats;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {
    check_stats_device(device);
    DeviceState& st = device_state(device);
    Guard guard(st.lock);
    for_each_stat_array(st.stats, [](c10::CachingAllocator::Stat& s) { s.reset_accumulated(); });
    auto& s = st.stats;
    s.num_alloc_retries = s.num_ooms = s.num_sync_all_streams = 0;
    s.num_device_alloc = s.num_device_free = s.num_oom_rejections = 0;
  }
  void resetPeakStats(c10::DeviceIndex device) override {
    check_stats_device(device);
    DeviceState& st = device_state(device);
    Guard guard(st.lock);
    for_each_stat_array(st.stats, [](c10::CachingAllocator::Stat& s) { s.reset_peak(); });
    st.peaks_pending = false;
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    return device_memory_info(device);
  }
};

NpuAllocator g_npu_allocator;

}  // namespace

c10::DeviceAllocator* npu_allocator() {
  return &g_npu_allocator;
}

std::atomic<bool> g_allocator_initialized{false};

void init_allocator_settings() {
  allocator_config();  // throws on an invalid PYTORCH_NPU_ALLOC_CONF
  device_capacity();   // throws on an invalid VNPU_SOC / VNPU_DEVICE_MEMORY
  g_allocator_initialized.store(true, std::memory_order_release);
}

}  // namespace vnpu
