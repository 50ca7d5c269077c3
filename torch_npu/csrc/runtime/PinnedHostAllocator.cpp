#include "runtime/PinnedHostAllocator.h"

#include <c10/util/Exception.h>
#include <c10/util/llvmMathExtras.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace vnpu {
namespace {

constexpr size_t kAlignment = 64;

struct PinnedState {
  std::mutex mu;
  std::map<uintptr_t, size_t> blocks;                     // every block held, by address
  std::unordered_map<size_t, std::vector<void*>> cached;  // free blocks by size
  PinnedHostStats stats;
};

PinnedState& state() {
  static auto* s = new PinnedState();
  return *s;
}

size_t block_size(size_t n) {
  return std::max<size_t>(kAlignment, c10::llvm::PowerOf2Ceil(n));
}

void pinned_free(void* ptr) {
  auto& st = state();
  std::lock_guard<std::mutex> guard(st.mu);
  auto it = st.blocks.find(reinterpret_cast<uintptr_t>(ptr));
  TORCH_INTERNAL_ASSERT(it != st.blocks.end(), "freeing a pointer the pinned allocator does not own");
  st.cached[it->second].push_back(ptr);
  st.stats.allocations -= 1;
  st.stats.allocated_bytes -= static_cast<int64_t>(it->second);
}

struct PinnedHostAllocator final : at::Allocator {
  c10::DataPtr allocate(size_t n) override {
    if (n == 0) {
      return {nullptr, nullptr, &pinned_free, c10::Device(c10::kCPU)};
    }
    const size_t size = block_size(n);
    auto& st = state();
    std::lock_guard<std::mutex> guard(st.mu);
    void* ptr = nullptr;
    auto& free_list = st.cached[size];
    if (!free_list.empty()) {
      ptr = free_list.back();
      free_list.pop_back();
    } else {
      ptr = std::aligned_alloc(kAlignment, size);
      TORCH_CHECK_WITH(OutOfMemoryError, ptr != nullptr, "Pinned host memory allocation of ", size,
                       " bytes failed: the host is out of memory");
      st.blocks.emplace(reinterpret_cast<uintptr_t>(ptr), size);
      st.stats.num_host_alloc += 1;
      st.stats.reserved_bytes += static_cast<int64_t>(size);
      st.stats.reserved_bytes_peak = std::max(st.stats.reserved_bytes_peak, st.stats.reserved_bytes);
    }
    st.stats.allocations += 1;
    st.stats.allocated_bytes += static_cast<int64_t>(size);
    st.stats.allocations_peak = std::max(st.stats.allocations_peak, st.stats.allocations);
    st.stats.allocated_bytes_peak = std::max(st.stats.allocated_bytes_peak, st.stats.allocated_bytes);
    return {ptr, ptr, &pinned_free, c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override {
    return &pinned_free;
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

PinnedHostAllocator g_pinned;

}  // namespace

at::Allocator* pinned_host_allocator() {
  return &g_pinned;
}

bool is_pinned_ptr(const void* ptr) {
  auto& st = state();
  std::lock_guard<std::mutex> guard(st.mu);
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  auto it = st.blocks.upper_bound(address);
  if (it == st.blocks.begin()) {
    return false;
  }
  --it;
  return address < it->first + it->second;
}

void empty_pinned_cache() {
  auto& st = state();
  std::lock_guard<std::mutex> guard(st.mu);
  for (auto& [size, list] : st.cached) {
    for (void* ptr : list) {
      st.blocks.erase(reinterpret_cast<uintptr_t>(ptr));
      std::free(ptr);
      st.stats.num_host_free += 1;
      st.stats.reserved_bytes -= static_cast<int64_t>(size);
    }
    list.clear();
  }
}

void reset_pinned_host_peaks() {
  auto& st = state();
  std::lock_guard<std::mutex> guard(st.mu);
  st.stats.allocations_peak = st.stats.allocations;
  st.stats.allocated_bytes_peak = st.stats.allocated_bytes;
  st.stats.reserved_bytes_peak = st.stats.reserved_bytes;
}

void reset_pinned_host_accumulated() {
  auto& st = state();
  std::lock_guard<std::mutex> guard(st.mu);
  st.stats.num_host_alloc = 0;
  st.stats.num_host_free = 0;
}

PinnedHostStats pinned_host_stats() {
  auto& st = state();
  std::lock_guard<std::mutex> guard(st.mu);
  return st.stats;
}

}  // namespace vnpu
