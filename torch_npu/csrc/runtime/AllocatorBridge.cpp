// The CPU allocator bridge: while the redirect runs an npu operator's CPU kernel, the kernel's
// allocations come from the npu pools of the operator's device. Such blocks are then claimed by
// the npu tensors the redirect returns, without copying.
#include "runtime/CachingAllocator.h"
#include "runtime/CachingAllocatorInternal.h"
#include "runtime/Device.h"
#include "runtime/ProcessRegistry.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/flat_hash_map.h>

#include <mutex>

namespace vnpu {
namespace {

using Guard = std::lock_guard<SpinLock>;
thread_local c10::DeviceIndex tl_pool_device = -1;
thread_local bool tl_pool_kernel = false;  // the scope's memory is a kernel's (PoolUse::kKernel)

// Blocks handed to CPU kernels through the CPU allocator bridge. The bridge must honour the CPU
// allocator's raw_allocate contract (context == data pointer, one deleter for everything), so
// its blocks are found by address until the redirect claims them for an npu tensor.
struct BridgeBlocks {
  SpinLock lock;
  ska::flat_hash_map<void*, Block*> blocks;
};
BridgeBlocks& bridge_blocks() {
  static auto* b = new BridgeBlocks();
  return *b;
}
c10::Allocator* g_cpu_fallback = nullptr;

void free_bridge_ptr(void* ptr) {
  Block* block = nullptr;
  {
    auto& b = bridge_blocks();
    Guard guard(b.lock);
    auto it = b.blocks.find(ptr);
    if (it != b.blocks.end()) {
      block = it->second;
      b.blocks.erase(it);
    }
  }
  if (block != nullptr) {
    free_kernel_block(block);
  } else {
    g_cpu_fallback->raw_deleter()(ptr);  // raw_allocate'd outside a pool scope
  }
}

Block* find_bridge_block(void* ptr, bool take) {
  auto& b = bridge_blocks();
  Guard guard(b.lock);
  auto it = b.blocks.find(ptr);
  if (it == b.blocks.end()) {
    return nullptr;
  }
  Block* block = it->second;
  if (take) {
    b.blocks.erase(it);
  }
  return block;
}

const Block* block_of(const c10::DataPtr& data_ptr) {
  if (data_ptr.get_deleter() == &free_block) {
    return static_cast<const Block*>(data_ptr.get_context());
  }
  if (data_ptr.get_deleter() == &free_bridge_ptr) {
    return find_bridge_block(data_ptr.get(), /*take=*/false);
  }
  return nullptr;
}

// The CPU allocator while an npu operator's CPU kernel runs on this thread: its allocations
// are npu memory. Everywhere else it is the CPU allocator it replaced.
struct CpuAllocatorBridge final : c10::Allocator {
  c10::Allocator* fallback = nullptr;
  c10::DataPtr allocate(size_t bytes) override {
    const auto device = tl_pool_device;
    if (device < 0) {
      return fallback->allocate(bytes);
    }
    if (bytes == 0) {
      return c10::DataPtr(nullptr, c10::Device(c10::kCPU));
    }
    Block* block = pool_allocate_block(bytes, device, tl_pool_kernel);
    {
      auto& b = bridge_blocks();
      Guard guard(b.lock);
      b.blocks.emplace(block->ptr, block);
    }
    return c10::DataPtr(block->ptr, block->ptr, &free_bridge_ptr, c10::Device(c10::kCPU));
  }
  c10::DeleterFnPtr raw_deleter() const override {
    // Memory from raw_allocate is freed through here, pool block or not.
    return fallback->raw_deleter() != nullptr ? &free_bridge_ptr : nullptr;
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    fallback->copy_data(dest, src, count);
  }
};

}  // namespace

DevicePoolScope::DevicePoolScope(c10::DeviceIndex device, PoolUse use)
    : device_(device), previous_(tl_pool_device), previous_kernel_(tl_pool_kernel) {
  tl_pool_device = device;
  tl_pool_kernel = use == PoolUse::kKernel;
  if (previous_ < 0) {
    mark_device_busy(device, true);
    note_device_context(device);
  }
}

DevicePoolScope::~DevicePoolScope() {
  tl_pool_device = previous_;
  tl_pool_kernel = previous_kernel_;
  if (previous_ < 0) {
    mark_device_busy(device_, false);
  }
}

void install_cpu_allocator_bridge() {
  static CpuAllocatorBridge bridge;
  if (bridge.fallback == nullptr) {
    bridge.fallback = c10::GetCPUAllocator();
    g_cpu_fallback = bridge.fallback;
    c10::SetCPUAllocator(&bridge, /*priority=*/1);
  }
}

bool is_pool_block(const c10::DataPtr& data_ptr) {
  return block_of(data_ptr) != nullptr;
}

c10::DeviceIndex pool_block_device(const c10::DataPtr& data_ptr) {
  const Block* block = block_of(data_ptr);
  return block != nullptr ? block->device : -1;
}

bool claim_pool_block(c10::DataPtr& data_ptr, c10::DeviceIndex device) {
  if (data_ptr.get_deleter() == &free_block) {
    if (static_cast<const Block*>(data_ptr.get_context())->device != device) {
      return false;
    }
    data_ptr.unsafe_set_device(c10::Device(kNpu, device));
    return true;
  }
  if (data_ptr.get_deleter() != &free_bridge_ptr) {
    return false;
  }
  Block* block = nullptr;
  {
    auto& b = bridge_blocks();
    Guard guard(b.lock);
    auto it = b.blocks.find(data_ptr.get());
    if (it == b.blocks.end() || it->second->device != device) {
      return false;
    }
    block = it->second;
    b.blocks.erase(it);
  }
  // Same block, still allocated in its pool: only the DataPtr's form changes.
  data_ptr.release_context();
  data_ptr = c10::DataPtr(block->ptr, block, &free_block, c10::Device(kNpu, device));
  return true;
}

}  // namespace vnpu
