// The card's FFT plan cache (torch.npu.backends.fft_plan_cache).
#pragma once

#include <cstdint>

namespace vnpu {

int64_t fft_plan_cache_size();
int64_t fft_plan_cache_max_size();
// 1 to 99, as torch_npu allows; raises RuntimeError otherwise.
void set_fft_plan_cache_max_size(int64_t size);
void clear_fft_plan_cache();

}  // namespace vnpu
