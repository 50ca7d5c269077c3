// Page-locked ("pinned") host memory for pin_memory() and non_blocking copies: a caching host
// allocator that rounds requests to powers of two, reuses freed blocks, and answers is_pinned().
#pragma once

#include <c10/core/Allocator.h>

#include <cstdint>

namespace vnpu {

at::Allocator* pinned_host_allocator();
bool is_pinned_ptr(const void* ptr);
void empty_pinned_cache();

struct PinnedHostStats {
  int64_t num_host_alloc = 0;  // blocks obtained from the OS
  int64_t num_host_free = 0;   // blocks returned to the OS
  int64_t allocations = 0;     // blocks currently handed out
  int64_t allocations_peak = 0;
  int64_t allocated_bytes = 0;  // bytes currently handed out
  int64_t allocated_bytes_peak = 0;
  int64_t reserved_bytes = 0;  // bytes held (handed out + cached)
  int64_t reserved_bytes_peak = 0;
};
PinnedHostStats pinned_host_stats();
void reset_pinned_host_peaks();
void reset_pinned_host_accumulated();

}  // namespace vnpu
