// What the CPU allocator bridge (AllocatorBridge.cpp) and the pool checkpoints (PoolCheckpoint.cpp) need
// from the caching allocator.
#pragma once

#include "runtime/BlockPool.h"
#include "runtime/DeviceMemoryState.h"

namespace vnpu {

// Allocates a block of `bytes` from `device`'s pools (raises the NPU OOM error when full).
//
// A block for a CPU kernel running an npu operator (for_kernel) raises the current statistics but not
// their peaks: peaks are taken at operator boundaries (the next allocation or free of an npu tensor,
// or a statistics read), so memory a CPU kernel takes and gives back while it runs (its scratch, which
// has nothing to do with what a card's kernel would use) never shows in max_memory_allocated. It counts
// for capacity and OOM like any block.
Block* pool_allocate_block(size_t bytes, c10::DeviceIndex device, bool for_kernel = false);
// Returns a block to its pool; also the deleter of npu DataPtrs (context = the block).
void free_block(void* ctx);
// Returns a block a CPU kernel took and did not hand to an npu tensor (its peaks are not taken first).
void free_kernel_block(Block* block);

// With the device lock held: allocates the free block `block` (already out of its free list) for `size`
// bytes, splitting the rest off as a free block when `split`, and counts the allocation.
Block* take_block(DeviceState& st, Block* block, size_t size, size_t requested, bool split, bool for_kernel);
// With the device lock held: returns an allocated block to its pool, merging it with free neighbours;
// `settle` takes the peaks CPU kernels left pending first.
void free_block_locked(DeviceState& st, Block* block, bool settle);

}  // namespace vnpu
