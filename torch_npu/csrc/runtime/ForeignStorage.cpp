// npu storages over memory a CPU kernel obtained outside the npu pools (for example from a library buffer):
// the memory is adopted as it is, counted in the device's statistics as a segment of its own and bounded by
// the device's capacity as the pools are, and released with the CPU storage that owns it.
#include "runtime/CachingAllocator.h"
#include "runtime/Device.h"
#include "runtime/DeviceMemoryState.h"

namespace vnpu {
namespace {

// The CPU storage an adopted npu storage keeps alive, and what it added to its device's statistics.
struct ForeignMemory {
  c10::Storage storage;
  size_t bytes;
  c10::DeviceIndex device;
};

void update_foreign(DeviceState& st, int64_t bytes) {
  update_stat(st.stats.segment, false, bytes > 0 ? 1 : -1);
  update_stat(st.stats.reserved_bytes, false, bytes);
  update_stat(st.stats.allocation, false, bytes > 0 ? 1 : -1);
  update_stat(st.stats.allocated_bytes, false, bytes);
  update_stat(st.stats.active, false, bytes > 0 ? 1 : -1);
  update_stat(st.stats.active_bytes, false, bytes);
  update_stat(st.stats.requested_bytes, false, bytes);
}

void free_foreign(void* ctx) {
  auto* foreign = static_cast<ForeignMemory*>(ctx);
  {
    DeviceState& st = device_state(foreign->device);
    Guard guard(st.lock);
    update_foreign(st, -static_cast<int64_t>(foreign->bytes));
  }
  delete foreign;
}

}  // namespace

c10::DataPtr adopt_foreign_storage(const c10::Storage& cpu_storage, c10::DeviceIndex device) {
  const size_t n = cpu_storage.nbytes();
  void* data = const_cast<void*>(cpu_storage.data());
  if (n == 0) {
    return c10::DataPtr(nullptr, c10::Device(kNpu, device));
  }
  init_allocator();
  DeviceState& st = device_state(device);
  {
    Guard guard(st.lock);
    if (current(st.stats.reserved_bytes) + static_cast<int64_t>(n) > allowed_bytes(st)) {
      throw_oom(st, device, n, "");
    }
    update_foreign(st, static_cast<int64_t>(n));
  }
  return c10::DataPtr(data, new ForeignMemory{cpu_storage, n, device}, &free_foreign, c10::Device(kNpu, device));
}

}  // namespace vnpu
