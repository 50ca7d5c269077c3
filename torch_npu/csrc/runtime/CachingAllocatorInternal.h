// What the CPU allocator bridge (AllocatorBridge.cpp) needs from the caching allocator.
#pragma once

#include "runtime/BlockPool.h"

namespace vnpu {

// Allocates a block of `bytes` from `device`'s pools (raises the NPU OOM error when full).
Block* pool_allocate_block(size_t bytes, c10::DeviceIndex device);
// Returns a block to its pool; also the deleter of npu DataPtrs (context = the block).
void free_block(void* ctx);

}  // namespace vnpu
