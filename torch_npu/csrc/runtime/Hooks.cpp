// PrivateUse1 hooks: what generic PyTorch code (generators, pinned memory, storage resize,
// torch.accelerator) asks the npu backend.
#include "runtime/CachingAllocator.h"
#include "runtime/Device.h"
#include "runtime/Generator.h"
#include "runtime/PinnedHostAllocator.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/DeviceGuard.h>

#include <cstring>

namespace vnpu {
namespace {

struct NpuHooks final : at::PrivateUse1HooksInterface {
  bool isBuilt() const override {
    return true;
  }
  bool isAvailable() const override {
    return device_count() > 0;
  }
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    return has_device_context(device_index);
  }
  void init() const override {
    fix_device_table();
    init_allocator();
    note_device_context(current_device());
  }
  c10::DeviceIndex deviceCount() const override {
    return device_count();
  }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    set_device(device);
  }
  c10::DeviceIndex getCurrentDevice() const override {
    return current_device();
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    return vnpu::exchange_device(device);
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return vnpu::exchange_device(device);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return default_generator(device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    return new_generator(device);
  }
  at::Allocator* getPinnedMemoryAllocator() const override {
    return pinned_host_allocator();
  }
  bool isPinnedPtr(const void* data) const override {
    return is_pinned_ptr(data);
  }
  at::Device getDeviceFromPtr(void* /*data*/) const override {
    return at::Device(kNpu, current_device());
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override {
    auto* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    c10::DeviceGuard guard(storage.device());
    c10::DataPtr data = npu_allocator()->allocate(new_bytes);
    const size_t keep = std::min(new_bytes, storage.nbytes());
    if (keep > 0) {
      std::memcpy(data.get(), storage.data(), keep);
    }
    impl->set_data_ptr_noswap(std::move(data));
    impl->set_nbytes(new_bytes);
  }
};

const bool registered = [] {
  at::RegisterPrivateUse1HooksInterface(new NpuHooks());
  return true;
}();

}  // namespace
}  // namespace vnpu
