#include "runtime/PoolCheckpoint.h"

#include "runtime/CachingAllocatorInternal.h"
#include "runtime/Device.h"
#include "runtime/DeviceMemoryState.h"

#include <c10/util/Exception.h>

namespace vnpu {
namespace {

// The first block of each segment of `pool`, in address order.
std::vector<Block*> pool_segments(DeviceState& st, uint64_t pool) {
  std::vector<Block*> heads;
  for (const auto& [address, head] : st.segments) {
    if (head->pool == pool) {
      heads.push_back(head);
    }
  }
  return heads;
}

// Splits the free segment starting at `head` into the checkpoint's blocks and allocates the ones the
// checkpoint had allocated (all are allocated first, then the others freed: freeing merges free
// neighbours, as the checkpointed layout had them merged).
void restore_segment(DeviceState& st, Block* head, const std::vector<BlockState>& blocks, CheckpointDelta& delta) {
  std::vector<Block*> pieces;
  Block* block = head;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const bool split = i + 1 < blocks.size();
    // every block of the pool was freed, so the segment is one free block and the checkpoint's pieces tile it
    TORCH_INTERNAL_ASSERT(block != nullptr && !block->allocated &&
                          reinterpret_cast<uintptr_t>(block->ptr) == blocks[i].ptr &&
                          (split ? block->size > blocks[i].size : block->size == blocks[i].size));
    st.erase_free(block);
    take_block(st, block, blocks[i].size, blocks[i].requested, split, /*for_kernel=*/false);
    pieces.push_back(block);
    block = block->next;
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].allocated) {
      delta.blocks_allocated.push_back(pieces[i]);
    } else {
      free_block_locked(st, pieces[i], /*settle=*/true);
    }
  }
}

}  // namespace

std::shared_ptr<PoolCheckpoint> pool_checkpoint(c10::DeviceIndex device, uint64_t pool) {
  check_device_index(device);
  auto checkpoint = std::make_shared<PoolCheckpoint>();
  checkpoint->device = device;
  checkpoint->pool = pool;
  DeviceState& st = device_state(device);
  Guard guard(st.lock);
  for (Block* head : pool_segments(st, pool)) {
    auto& blocks = checkpoint->segments.emplace_back();
    for (const Block* b = head; b != nullptr; b = b->next) {
      blocks.push_back({reinterpret_cast<uintptr_t>(b->ptr), b->size, b->requested, b->allocated});
    }
  }
  return checkpoint;
}

CheckpointDelta restore_pool_checkpoint(const PoolCheckpoint& checkpoint) {
  CheckpointDelta delta;
  DeviceState& st = device_state(checkpoint.device);
  {
    Guard guard(st.lock);
    // freeing a block merges it with free neighbours (their records are recycled), never with an
    // allocated one: the allocated blocks are collected first, then freed
    std::vector<Block*> allocated;
    for (Block* head : pool_segments(st, checkpoint.pool)) {
      for (Block* b = head; b != nullptr; b = b->next) {
        if (b->allocated) {
          allocated.push_back(b);
        }
      }
    }
    for (Block* b : allocated) {
      delta.ptrs_freed.push_back(b->ptr);
      free_block_locked(st, b, /*settle=*/true);
    }
    for (const auto& blocks : checkpoint.segments) {
      const auto found = st.segments.find(blocks.front().ptr);
      TORCH_CHECK(found != st.segments.end() && found->second->pool == checkpoint.pool,
                  "a checkpointed segment of the npu memory pool no longer exists");
      restore_segment(st, found->second, blocks, delta);
    }
  }
  flush_events();
  return delta;
}

bool pool_allocations_are(c10::DeviceIndex device, uint64_t pool, const std::unordered_set<uintptr_t>& ptrs) {
  check_device_index(device);
  DeviceState& st = device_state(device);
  Guard guard(st.lock);
  size_t allocated = 0;
  for (Block* head : pool_segments(st, pool)) {
    for (const Block* b = head; b != nullptr; b = b->next) {
      if (b->allocated) {
        if (ptrs.count(reinterpret_cast<uintptr_t>(b->ptr)) == 0) {
          return false;
        }
        ++allocated;
      }
    }
  }
  return allocated == ptrs.size();
}

void* allocate_raw_block(size_t bytes) {
  const auto device = current_device();
  note_device_context(device);
  return bytes == 0 ? nullptr : pool_allocate_block(bytes, device)->ptr;
}

void free_block_at(void* ptr) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
    DeviceState& st = device_state(d);
    std::unique_lock<SpinLock> guard(st.lock);
    auto segment = st.segments.upper_bound(address);
    if (segment == st.segments.begin()) {
      continue;
    }
    for (Block* b = std::prev(segment)->second; b != nullptr; b = b->next) {
      if (b->ptr == ptr && b->allocated) {
        free_block_locked(st, b, /*settle=*/true);
        guard.unlock();
        flush_events();
        return;
      }
    }
  }
  TORCH_CHECK(false, "invalid device pointer: ", ptr, " is not an allocated block of an npu memory pool");
}

}  // namespace vnpu
