// The npu caching allocator, modelled on torch_npu's NPUCachingAllocator: 512-byte rounding
// (after torch_npu's 32-byte pad), a small pool (<= 1 MiB, packed in 2 MiB segments) and a large
// pool (20 MiB segments below 10 MiB, 2 MiB rounding above), best-fit reuse, block splitting and
// merging, a per-device capacity from the SoC profile, and CUDA-compatible statistics.
//
// Device memory is host memory. Memory that CPU kernels allocate while they run an npu operator
// comes from the same pools (see DevicePoolScope), so it is counted and capacity-checked too.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/ScalarType.h>
#include <c10/core/Storage.h>
#include <c10/util/ArrayRef.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace vnpu {

c10::DeviceAllocator* npu_allocator();

// Parses the allocator configuration and SoC capacity; throws on invalid environment values.
extern std::atomic<bool> g_allocator_initialized;
void init_allocator_settings();
inline void init_allocator() {
  if (C10_UNLIKELY(!g_allocator_initialized.load(std::memory_order_acquire))) {
    init_allocator_settings();
  }
}

// While alive, the CPU allocator of this thread serves requests from npu device `device`'s pools
// (the redirect opens one around each CPU kernel it runs for an npu operator), and the device counts
// as busy for npu-smi's AI Core usage (runtime/ProcessRegistry.h).
//
// What the memory is for decides when its peaks count: a kernel's blocks (its results, and scratch it
// gives back before it returns) raise the peak statistics only at the next operator boundary, so the
// scratch of a CPU implementation never shows in max_memory_allocated; a program's blocks (the buffers
// of host-compiled code, tensors of the program on a card too) raise them at once.
enum class PoolUse { kKernel, kProgram };
class DevicePoolScope {
 public:
  explicit DevicePoolScope(c10::DeviceIndex device, PoolUse use = PoolUse::kKernel);
  ~DevicePoolScope();
  DevicePoolScope(const DevicePoolScope&) = delete;
  DevicePoolScope& operator=(const DevicePoolScope&) = delete;

 private:
  c10::DeviceIndex device_;
  c10::DeviceIndex previous_;
  bool previous_kernel_;
};

// Registers the CPU allocator that honours DevicePoolScope (delegating to the previous CPU
// allocator outside a scope).
void install_cpu_allocator_bridge();

// True when the DataPtr is a block of an npu pool (whatever device it is tagged with).
bool is_pool_block(const c10::DataPtr& data_ptr);
// The npu device whose pool the DataPtr's memory belongs to, -1 if none.
c10::DeviceIndex pool_block_device(const c10::DataPtr& data_ptr);
// Makes a pool block of `device` (from either allocator face) the memory of an npu tensor:
// rewrites the DataPtr in place (npu device tag, block context). False if it is not one.
bool claim_pool_block(c10::DataPtr& data_ptr, c10::DeviceIndex device);

// Takes over memory owned by a CPU storage that did not come from an npu pool, counting it
// against device `device` (raises the OOM error when that exceeds the capacity).
c10::DataPtr adopt_foreign_storage(const c10::Storage& cpu_storage, c10::DeviceIndex device);

// The allocator's free mutex (torch_npu's getFreeMutex, CUDA's cudaFreeMutex): held while segments go back to
// the host, so a thread that holds it (torch_npu._C._npu_lock_mutex) keeps device memory from being released
// by others meanwhile. Taken before a device's allocator lock; under that lock only tried (a release the
// allocation path would make is then skipped).
std::recursive_mutex& free_mutex();

// The sizes and dtype of the tensor an npu storage was made for, as torch_npu's storage descriptor keeps them
// (its base sizes): recorded with a private format; nullopt when none was recorded.
struct StorageBase {
  std::vector<int64_t> sizes;
  c10::ScalarType dtype;
};
// The private format torch_npu would give an npu storage (see torch_npu.Format) and its physical element count,
// with the base when one is given, kept with the storage's memory block; false / (-1, -1) for memory that is not
// an npu block.
bool set_storage_format(const c10::DataPtr& data_ptr, int32_t format, int64_t storage_numel,
                        const std::optional<StorageBase>& base = std::nullopt);
// The same with the base given as a view (no vector built: every npu storage made records its bytes as its base).
bool set_storage_format(const c10::DataPtr& data_ptr, int32_t format, int64_t storage_numel,
                        c10::IntArrayRef base_sizes, c10::ScalarType base_dtype);
std::pair<int32_t, int64_t> storage_format(const c10::DataPtr& data_ptr);
std::optional<StorageBase> storage_base(const c10::DataPtr& data_ptr);
// The same memory without owning it (torch_npu's weak reference to a tensor): the format and base its block
// carries read through it, and dropping it frees nothing; the owner must outlive it.
c10::DataPtr borrowed_data_ptr(const c10::DataPtr& owner);
// Makes storages created on their own (torch.UntypedStorage(n, device="npu"), a storage moved to npu) carry the
// descriptor torch_npu gives them, one dimension of bytes: a tensor set_() onto such a storage lays out as that
// descriptor says, not as its own shape. Storages made for a tensor keep the tensor's.
void register_npu_storage_creation();

// torch.npu.MemPool: a pool of segments of its own. Allocations made on a device while a thread
// uses a pool (set_thread_mem_pool) come from it; its memory stays reserved until release.
uint64_t create_mem_pool();
void release_mem_pool(uint64_t id);
void set_thread_mem_pool(c10::DeviceIndex device, uint64_t id);
uint64_t thread_mem_pool(c10::DeviceIndex device);
// The memory pool whose segments hold `ptr` on `device` (0 for the default pool and for memory of no segment).
uint64_t pool_of_memory(c10::DeviceIndex device, const void* ptr);

void set_memory_fraction(double fraction, c10::DeviceIndex device);
double get_memory_fraction(c10::DeviceIndex device);
// (free, total) in bytes, as aclrtGetMemInfo reports them.
std::pair<size_t, size_t> device_memory_info(c10::DeviceIndex device);

struct BlockInfo {
  uintptr_t address;
  size_t size;
  size_t requested;
  bool allocated;
};
struct SegmentInfo {
  c10::DeviceIndex device;
  uintptr_t address;
  size_t total_size;
  size_t allocated_size;
  size_t active_size;
  size_t requested_size;
  bool small;
  uint64_t pool;
  std::vector<BlockInfo> blocks;
};
std::vector<SegmentInfo> memory_snapshot();

std::string format_size(uint64_t size);

}  // namespace vnpu
