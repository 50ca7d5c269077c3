// Memory pools (torch.npu.MemPool), per-process fractions, memory info, snapshots and storage
// formats: the caching allocator's state read and configured outside the allocation path.
#include "runtime/AllocatorConfig.h"
#include "runtime/CachingAllocator.h"
#include "runtime/CachingAllocatorInternal.h"
#include "runtime/Device.h"
#include "runtime/DeviceMemoryState.h"
#include "runtime/SocProfile.h"

#include <array>
#include <atomic>
#include <sstream>

namespace vnpu {
namespace {

thread_local std::array<uint64_t, kMaxDevices> tl_mem_pool{};

}  // namespace

std::atomic<int> g_mem_pool_routes{0};

uint64_t thread_pool_entry(c10::DeviceIndex device) {
  return tl_mem_pool[static_cast<size_t>(device)];
}

namespace {
// the deleter of a borrowed reference to a block: the block stays its owner's
void keep_block(void* /*ctx*/) {}

Block* npu_block_of(const c10::DataPtr& data_ptr) {
  const auto deleter = data_ptr.get_deleter();
  return deleter == &free_block || deleter == &keep_block ? static_cast<Block*>(data_ptr.get_context()) : nullptr;
}

c10::intrusive_ptr<c10::StorageImpl> make_npu_storage(c10::StorageImpl::use_byte_size_t, c10::SymInt size_bytes,
                                                      c10::DataPtr data_ptr, c10::Allocator* allocator,
                                                      bool resizable) {
  auto storage = data_ptr ? c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), size_bytes,
                                                                  std::move(data_ptr), allocator, resizable)
                          : c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), size_bytes,
                                                                  allocator, resizable);
  const int64_t bytes = static_cast<int64_t>(storage->nbytes());
  set_storage_format(storage->data_ptr(), /*format=*/-1, /*storage_numel=*/-1, /*base_sizes=*/bytes,
                     c10::ScalarType::Byte);
  return storage;
}
}  // namespace

void register_npu_storage_creation() {
  c10::SetStorageImplCreate(c10::DeviceType::PrivateUse1, &make_npu_storage);
}

c10::DataPtr borrowed_data_ptr(const c10::DataPtr& owner) {
  Block* block = npu_block_of(owner);
  return block == nullptr ? c10::DataPtr(owner.get(), owner.device())
                          : c10::DataPtr(owner.get(), block, &keep_block, owner.device());
}

bool set_storage_format(const c10::DataPtr& data_ptr, int32_t format, int64_t storage_numel,
                        const std::optional<StorageBase>& base) {
  if (base) {
    return set_storage_format(data_ptr, format, storage_numel, base->sizes, base->dtype);
  }
  Block* block = npu_block_of(data_ptr);
  if (block == nullptr) {
    return false;
  }
  block->npu_format = format;
  block->storage_numel = storage_numel;
  return true;
}

bool set_storage_format(const c10::DataPtr& data_ptr, int32_t format, int64_t storage_numel,
                        c10::IntArrayRef base_sizes, c10::ScalarType base_dtype) {
  Block* block = npu_block_of(data_ptr);
  if (block == nullptr) {
    return false;
  }
  block->npu_format = format;
  block->storage_numel = storage_numel;
  block->base_sizes.assign(base_sizes.begin(), base_sizes.end());
  block->base_dtype = base_dtype;
  return true;
}

std::pair<int32_t, int64_t> storage_format(const c10::DataPtr& data_ptr) {
  const Block* block = npu_block_of(data_ptr);
  return block == nullptr ? std::make_pair(int32_t(-1), int64_t(-1))
                          : std::make_pair(block->npu_format, block->storage_numel);
}

std::optional<StorageBase> storage_base(const c10::DataPtr& data_ptr) {
  const Block* block = npu_block_of(data_ptr);
  if (block == nullptr || block->base_dtype == c10::ScalarType::Undefined) {
    return std::nullopt;
  }
  return StorageBase{{block->base_sizes.begin(), block->base_sizes.end()}, block->base_dtype};
}

uint64_t pool_of_memory(c10::DeviceIndex device, const void* ptr) {
  if (device < 0 || device >= device_count()) {
    return 0;
  }
  DeviceState& st = device_state(device);
  Guard guard(st.lock);
  auto segment = st.segments.upper_bound(reinterpret_cast<uintptr_t>(ptr));
  if (segment == st.segments.begin()) {
    return 0;
  }
  const Block* head = std::prev(segment)->second;
  size_t total = 0;
  for (const Block* b = head; b != nullptr; b = b->next) {
    total += b->size;
  }
  return reinterpret_cast<const char*>(ptr) < head->ptr + total ? head->pool : 0;
}

uint64_t create_mem_pool() {
  static std::atomic<uint64_t> next{1};
  return next++;
}

void release_mem_pool(uint64_t id) {
  std::lock_guard<std::recursive_mutex> releasing(free_mutex());
  for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
    DeviceState& st = device_state(d);
    {
      Guard guard(st.lock);
      st.released_pools.insert(id);
      release_free_segments(st);
    }
    flush_events();
  }
}

void set_thread_mem_pool(c10::DeviceIndex device, uint64_t id) {
  check_device_index(device);
  uint64_t& entry = tl_mem_pool[static_cast<size_t>(device)];
  g_mem_pool_routes.fetch_add(static_cast<int>(id != 0) - static_cast<int>(entry != 0), std::memory_order_relaxed);
  entry = id;
}

uint64_t thread_mem_pool(c10::DeviceIndex device) {
  check_device_index(device);
  return tl_mem_pool[static_cast<size_t>(device)];
}

void set_memory_fraction(double fraction, c10::DeviceIndex device) {
  check_device_index(device);
  DeviceState& st = device_state(device);
  Guard guard(st.lock);
  st.fraction = fraction;
}

double get_memory_fraction(c10::DeviceIndex device) {
  check_device_index(device);
  DeviceState& st = device_state(device);
  Guard guard(st.lock);
  return st.fraction >= 0 ? st.fraction : allocator_config().per_process_memory_fraction;
}

std::pair<size_t, size_t> device_memory_info(c10::DeviceIndex device) {
  check_device_index(device);
  DeviceState& st = device_state(device);
  Guard guard(st.lock);
  const int64_t total = device_capacity();
  const int64_t used = current(st.stats.reserved_bytes);
  return {static_cast<size_t>(std::max<int64_t>(total - used, 0)), static_cast<size_t>(total)};
}

std::vector<SegmentInfo> memory_snapshot() {
  std::vector<SegmentInfo> result;
  for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
    DeviceState& st = device_state(d);
    Guard guard(st.lock);
    for (const auto& [address, head] : st.segments) {
      SegmentInfo seg{d, address, 0, 0, 0, 0, head->small, head->pool, {}};
      for (const Block* b = head; b != nullptr; b = b->next) {
        seg.total_size += b->size;
        if (b->allocated) {
          seg.allocated_size += b->size;
          seg.active_size += b->size;
          seg.requested_size += b->requested;
        }
        seg.blocks.push_back({reinterpret_cast<uintptr_t>(b->ptr), b->size, b->requested, b->allocated});
      }
      result.push_back(std::move(seg));
    }
  }
  return result;
}

std::string format_size(uint64_t size) {
  std::ostringstream os;
  os.precision(2);
  os << std::fixed;
  if (size <= 1024) {
    os << size << " bytes";
  } else if (size <= 1048576) {
    os << (static_cast<double>(size) / 1024.0) << " KiB";
  } else if (size <= 1073741824ULL) {
    os << (static_cast<double>(size) / 1048576.0) << " MiB";
  } else {
    os << (static_cast<double>(size) / 1073741824.0) << " GiB";
  }
  return os.str();
}

}  // namespace vnpu
