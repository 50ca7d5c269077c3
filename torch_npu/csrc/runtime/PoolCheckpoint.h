// Checkpoints of a memory pool's blocks, as PyTorch's CUDA graph trees take and restore them
// (torch_npu.npu._graph_tree): a graph tree records a new graph after replaying others whose outputs
// are still alive, so before recording it puts the pool back in the state it was in when the replayed
// path was recorded.
#pragma once

#include "runtime/BlockPool.h"

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <unordered_set>
#include <vector>

namespace vnpu {

struct BlockState {
  uintptr_t ptr;
  size_t size;
  size_t requested;
  bool allocated;
};

// The blocks of a pool's segments, in address order, one list per segment.
struct PoolCheckpoint {
  c10::DeviceIndex device;
  uint64_t pool;
  std::vector<std::vector<BlockState>> segments;
};

// What restoring a checkpoint changed: the blocks it freed (every block of the pool that was
// allocated) and the blocks it allocated again (those the checkpoint had allocated).
struct CheckpointDelta {
  std::vector<void*> ptrs_freed;
  std::vector<Block*> blocks_allocated;
};

std::shared_ptr<PoolCheckpoint> pool_checkpoint(c10::DeviceIndex device, uint64_t pool);
// Frees every allocated block of the checkpoint's pool, then splits each checkpointed segment as it was
// and allocates the blocks that were allocated. Raises if a checkpointed segment is gone.
CheckpointDelta restore_pool_checkpoint(const PoolCheckpoint& checkpoint);
// True when the pool's allocated blocks are exactly those at `ptrs`.
bool pool_allocations_are(c10::DeviceIndex device, uint64_t pool, const std::unordered_set<uintptr_t>& ptrs);
// A block of the current device's pool held by no tensor (nullptr for 0 bytes); free_block_at returns it.
void* allocate_raw_block(size_t bytes);
// Frees the allocated block that starts at `ptr`, on whatever device (raises if there is none).
void free_block_at(void* ptr);

}  // namespace vnpu
