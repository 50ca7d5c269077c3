// The correlation ids PyTorch's profiler pushes around each host operator (kineto hands them to the npu
// plugin's session), per thread. Device activity and allocator events record the innermost one, so the
// profiler links them to their host operator exactly, whatever the clocks say.
#pragma once

#include <cstdint>
#include <vector>

namespace vnpu {

inline thread_local std::vector<uint64_t> tl_profiler_correlation;

inline void push_correlation(uint64_t id) {
  tl_profiler_correlation.push_back(id);
}

inline void pop_correlation() {
  if (!tl_profiler_correlation.empty()) {
    tl_profiler_correlation.pop_back();
  }
}

// 0 when no host operator is being profiled on this thread.
inline uint64_t current_correlation() {
  return tl_profiler_correlation.empty() ? 0 : tl_profiler_correlation.back();
}

}  // namespace vnpu
