// npu device activity for PyTorch's own profiler: a kineto child activity profiler, so that
// torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) (and
// torch.autograd.profiler.profile(use_device="npu")) show every npu operator as a device kernel, with
// its device time attributed to the host operator that issued it (key_averages' device columns,
// kernels and flows in export_chrome_trace).
//
// While a session runs, an ActivityRecorder hook records the operators with the correlation id PyTorch
// pushes around each host operator on that thread; at processTrace each becomes a CONCURRENT_KERNEL
// activity in UNIX-epoch nanoseconds linked to its host operator. (No metadata: GenericTraceActivity's
// metadata helpers need fmt, which libtorch does not export.)
#include "profiler/KinetoNpuProfiler.h"

#include "profiler/ActivityRecorder.h"
#include "runtime/ProfilerCorrelation.h"
#include "runtime/Stream.h"

#include <kineto/GenericTraceActivity.h>
#include <kineto/IActivityProfiler.h>
#include <kineto/libkineto.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace vnpu {
namespace {

using libkineto::ActivityType;

const std::string kName = "vnpu";
std::atomic<bool> g_kernels_enabled{true};

const libkineto::TraceSpan& npu_span() {
  static const auto* span = new libkineto::TraceSpan(0, 0, "npu");  // copies of activities point at it
  return *span;
}

std::string op_type(const std::string& name) {
  auto begin = name.rfind("::");
  std::string type = begin == std::string::npos ? name : name.substr(begin + 2);
  auto dot = type.find('.');
  return dot == std::string::npos ? type : type.substr(0, dot);
}

class NpuSession final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    if (!kineto_npu_kernels_enabled()) {  // torch_npu.profiler records the kernels itself
      status_ = libkineto::TraceStatus::RECORDING;
      return;
    }
    epoch_offset_ns_ =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count() -
        now_ns();
    recording_.start(false);
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    if (auto recorder = recording_.stop()) {
      recorded_ = recorder->take();
    }
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override {
    return {};
  }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, nullptr, 0, INT64_MAX);
  }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked_activity,
                    int64_t start_time, int64_t end_time) override {
    // Link each kernel to the host operator that issued it (device time is attributed through `linked`;
    // no flow: without a runtime launch event on the host it would be an unpaired half).
    std::vector<const libkineto::ITraceActivity*> linked(recorded_.size(), nullptr);
    // PyTorch stamps host operators with its approximate clock converted to UNIX time; the kernels carry
    // the steady clock plus an offset taken at start. Align the two domains: shift the kernels by the
    // smallest amount that puts every kernel inside its host operator (when such a shift exists).
    int64_t lowest = INT64_MIN;
    int64_t highest = INT64_MAX;
    for (size_t i = 0; i < recorded_.size(); ++i) {
      const Activity& a = recorded_[i];
      if (linked_activity && a.correlation != 0) {
        linked[i] = linked_activity(static_cast<int32_t>(a.correlation));
      }
      if (linked[i] != nullptr) {
        const int64_t start = a.start_ns + epoch_offset_ns_;
        const int64_t end = a.end_ns + epoch_offset_ns_;
        lowest = std::max(lowest, linked[i]->timestamp() - start);
        highest = std::min(highest, linked[i]->timestamp() + linked[i]->duration() - end);
      }
    }
    int64_t shift = 0;
    if (lowest <= highest && (lowest > 0 || highest < 0)) {
      shift = lowest > 0 ? lowest : highest;
    }
    int64_t id = 0;
    for (size_t i = 0; i < recorded_.size(); ++i) {
      const Activity& a = recorded_[i];
      const int64_t start = a.start_ns + epoch_offset_ns_ + shift;
      const int64_t end = a.end_ns + epoch_offset_ns_ + shift;
      if (start < start_time || end > end_time) {
        continue;  // outside the capture window
      }
      libkineto::GenericTraceActivity kernel(npu_span(), ActivityType::CONCURRENT_KERNEL, op_type(a.name));
      kernel.startTime = start;
      kernel.endTime = end;
      kernel.device = a.device;
      kernel.resource = a.stream;
      kernel.id = ++id;
      kernel.linked = linked[i];
      kernel.log(logger);
    }
    recorded_.clear();
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return nullptr;
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    return {};
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return nullptr;
  }

  void pushCorrelationId(uint64_t id) override {
    push_correlation(id);
  }

  void popCorrelationId() override {
    pop_correlation();
  }

 private:
  HookSession<ActivityRecorder> recording_;
  std::vector<Activity> recorded_;
  int64_t epoch_offset_ns_ = 0;
};

class NpuActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override {
    return kName;
  }

  const std::set<ActivityType>& availableActivities() const override {
    static const std::set<ActivityType> types{ActivityType::CONCURRENT_KERNEL};
    return types;
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<ActivityType>& activity_types,
                                                                 const libkineto::Config&) override {
    if (activity_types.count(ActivityType::CONCURRENT_KERNEL) == 0) {
      return nullptr;
    }
    return std::make_unique<NpuSession>();
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<ActivityType>& activity_types,
                                                                 const libkineto::Config& config) override {
    return configure(activity_types, config);
  }
};

}  // namespace

bool kineto_npu_kernels_enabled() {
  return g_kernels_enabled.load();
}

void set_kineto_npu_kernels(bool enabled) {
  g_kernels_enabled.store(enabled);
}

void register_kineto_npu_profiler() {
  libkineto::api().registerProfilerFactory([] { return std::make_unique<NpuActivityProfiler>(); });
}

}  // namespace vnpu
