// c10's DeviceGuardImplInterface for npu: device switching, streams and events for guards,
// torch.Stream/torch.Event, torch.accelerator and the autograd engine.
#include "runtime/Device.h"
#include "runtime/DeviceTrace.h"
#include "runtime/ErrorCode.h"
#include "runtime/Stream.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

namespace vnpu {

// Work is complete when its operator returns, so an event only needs the time it was recorded.
struct Event {
  int64_t recorded_ns = 0;
  c10::DeviceIndex device = -1;
  bool timing = false;
};

int64_t event_recorded_ns(uintptr_t event_id) {
  TORCH_CHECK_VALUE(event_id != 0, "Event must be recorded before reading its recorded time.");
  return reinterpret_cast<const Event*>(event_id)->recorded_ns;
}

double event_elapsed_ms(uintptr_t start_id, uintptr_t end_id) {
  TORCH_CHECK(start_id != 0 && end_id != 0, "Both events must be recorded before calculating elapsed time.",
              error_suffix(SubModule::kPta, kErrInternal, "internal error"));
  const auto* a = reinterpret_cast<const Event*>(start_id);
  const auto* b = reinterpret_cast<const Event*>(end_id);
  TORCH_CHECK_VALUE(a->timing && b->timing, "Both events must be created with argument 'enable_timing=True'.");
  return static_cast<double>(b->recorded_ns - a->recorded_ns) / 1e6;
}

namespace {

struct NpuGuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override {
    return kNpu;
  }
  c10::Device exchangeDevice(c10::Device device) const override {
    return c10::Device(kNpu, vnpu::exchange_device(device.index()));
  }
  c10::Device getDevice() const override {
    return c10::Device(kNpu, current_device());
  }
  void setDevice(c10::Device device) const override {
    set_device(device.index());
  }
  void uncheckedSetDevice(c10::Device device) const noexcept override {
    set_device_unchecked(device.index());
  }
  c10::Stream getStream(c10::Device device) const override {
    return current_stream(device.index());
  }
  c10::Stream getDefaultStream(c10::Device device) const override {
    return default_stream(device.index());
  }
  c10::Stream getStreamFromGlobalPool(c10::Device device, bool is_high_priority) const override {
    return pool_stream(device.index(), is_high_priority ? -1 : 0);
  }
  c10::Stream getNewStream(c10::Device device, int priority) const override {
    return pool_stream(device.index(), priority);
  }
  c10::Stream exchangeStream(c10::Stream stream) const override {
    return exchange_stream(stream);
  }
  void* getStreamNativeHandle(const c10::Stream stream) const override {
    return stream_native_handle(stream);
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return device_count();
  }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "Event device index ",
                static_cast<int>(device_index), " does not match recording stream's device index ",
                static_cast<int>(stream.device_index()), ".");
    auto* e = static_cast<Event*>(*event);
    if (e == nullptr) {
      e = new Event();
      e->timing = flag == c10::EventFlag::BACKEND_DEFAULT;
      *event = e;
      trace::fire(trace::Point::EventCreation, e);
    }
    e->device = stream.device_index();
    e->recorded_ns = now_ns();
    if (trace::active()) {
      trace::fire(trace::Point::EventRecord, e, stream_native_handle(stream));
    }
  }
  void destroyEvent(void* event, const c10::DeviceIndex /*device_index*/) const noexcept override {
    if (event != nullptr) {
      trace::fire(trace::Point::EventDeletion, event);
    }
    delete static_cast<Event*>(event);
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (event != nullptr && trace::active()) {
      trace::fire(trace::Point::EventWait, event, stream_native_handle(stream));
    }
  }
  bool queryEvent(void* /*event*/) const override {
    return true;
  }
  // Work on an external stream was queued by whoever created it, outside torch_npu's reach.
  bool queryStream(const c10::Stream& stream) const override {
    TORCH_CHECK(!is_external(stream),
                "Cannot query external NPU stream status. The caller must track stream completion externally.",
                error_suffix(SubModule::kPta, kErrNotSupport, "feature not supported"));
    return true;
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    TORCH_CHECK(!is_external(stream),
                "External NPU stream is not supported in NPUStream::synchronize. The caller is responsible for "
                "synchronization of external streams.",
                error_suffix(SubModule::kPta, kErrNotSupport, "feature not supported"));
    if (trace::active()) {
      trace::fire(trace::Point::StreamSynchronization, stream_native_handle(stream));
    }
  }
  void synchronizeEvent(void* event) const override {
    if (event != nullptr) {
      trace::fire(trace::Point::EventSynchronization, event);
    }
  }
  void synchronizeDevice(const c10::DeviceIndex /*device_index*/) const override {
    trace::fire(trace::Point::DeviceSynchronization);
  }
  static bool is_external(const c10::Stream& stream) {
    return (stream.id() >> kStreamIdTypeShift) == static_cast<int>(StreamType::External);
  }
  void recordDataPtrOnStream(const c10::DataPtr& /*data_ptr*/, const c10::Stream& /*stream*/) const override {}
  double elapsedTime(void* start, void* end, const c10::DeviceIndex /*device_index*/) const override {
    return event_elapsed_ms(reinterpret_cast<uintptr_t>(start), reinterpret_cast<uintptr_t>(end));
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, NpuGuardImpl);

}  // namespace
}  // namespace vnpu
