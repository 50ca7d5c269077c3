// The privateuse1 marker stubs of PyTorch's profiler, used by
// torch.autograd.profiler.profile(use_device="npu", use_kineto=False) and the legacy profiler: each
// operator's range is stamped with host time on the current device, which on vnpu is the device time
// (operators run synchronously), giving the "Self NPU" / "NPU total" columns.
#include "profiler/ProfilerStubs.h"

#include "runtime/Device.h"
#include "runtime/Stream.h"

#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <memory>

namespace vnpu {
namespace {

class NpuProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
 public:
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    if (device != nullptr) {
      *device = current_device();
    }
    *event = std::make_shared<int64_t>(now_ns());
    if (cpu_ns != nullptr) {
      *cpu_ns = c10::getTime();
    }
  }

  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* event,
                const torch::profiler::impl::ProfilerVoidEventStub* event2) const override {
    const auto start = *static_cast<const int64_t*>(event->get());
    const auto end = *static_cast<const int64_t*>(event2->get());
    return static_cast<float>(end - start) / 1000.0f;  // microseconds
  }

  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}

  bool enabled() const override {
    return true;
  }

  void onEachDevice(std::function<void(int)> op) const override {
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
      op(d);
    }
  }

  void synchronize() const override {}  // operators have finished when they return
};

}  // namespace

void register_profiler_stubs() {
  static NpuProfilerStubs stubs;
  torch::profiler::impl::registerPrivateUse1Methods(&stubs);
}

}  // namespace vnpu
