// npu device activity for PyTorch's own profiler: a kineto child activity profiler, so that
// torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) (and
// torch.autograd.profiler.profile(use_device="npu")) show every npu operator as a device kernel, with
// its device time attributed to the host operator that issued it (key_averages' device columns,
// kernels and flows in export_chrome_trace).
//
// While a session runs, an ActivityRecorder hook records the operators with the correlation id PyTorch
// pushes around each host operator on that thread; at processTrace each becomes a CONCURRENT_KERNEL
// activity in UNIX-epoch nanoseconds linked to its host operator, with the kernel's type and stream, as
// torch_npu's mspti backend writes them. Each host operator that launched kernels gets one
// PRIVATEUSE1_RUNTIME launch activity on its thread, where an "ac2g" flow starts and ends on each of its
// kernels (flow id: the operator's correlation id, its "External id").
#include "profiler/KinetoNpuProfiler.h"

#include "profiler/ActivityRecorder.h"
#include "runtime/ProfilerCorrelation.h"
#include "runtime/Stream.h"

// GenericTraceActivity::addMetadata formats values with fmt, which libtorch does not export: compile fmt into this
// file (its symbols stay hidden in torch_npu._C).
#define FMT_HEADER_ONLY
#include <kineto/GenericTraceActivity.h>
#include <kineto/IActivityProfiler.h>
#include <kineto/libkineto.h>

#include <algorithm>
#include <atomic>
#include <cctype>
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

// The task type mspti gives the kernel: AI CPU for a CPU fallback, the cube (AI Core) for matrix products and
// convolutions, the vector unit otherwise.
const char* kernel_type(const Activity& a) {
  return a.cpu_fallback ? "KERNEL_AICPU" : a.cube ? "KERNEL_AICORE" : "KERNEL_AIVEC";
}

// An "ac2g" flow from the launch (start) to a kernel; its id is the operator's correlation id.
void set_flow(libkineto::GenericTraceActivity& activity, uint64_t correlation, bool start) {
  activity.flow.id = static_cast<uint32_t>(correlation);
  activity.flow.type = libkineto::kLinkAsyncCpuGpu;
  activity.flow.start = start ? 1 : 0;
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
    // Link each kernel to the host operator that issued it (device time is attributed through `linked`).
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
    std::set<uint64_t> launched;  // host operators whose launch activity is logged
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
      kernel.addMetadataQuoted("type", kernel_type(a));
      kernel.addMetadata("streamId", a.stream);
      if (linked[i] != nullptr) {
        set_flow(kernel, a.correlation, false);
        if (launched.insert(a.correlation).second) {
          log_launch(logger, a, *linked[i], start, ++id);
        }
      }
      kernel.log(logger);
    }
    recorded_.clear();
  }

  // The host side of the operator's first kernel: the runtime call that launched it, on the operator's thread (vnpu
  // runs the kernel there, so the call lasts as long as the kernel), where the operator's ac2g flow starts.
  static void log_launch(libkineto::ActivityLogger& logger, const Activity& a, const libkineto::ITraceActivity& op,
                         int64_t start, int64_t id) {
    std::string type = op_type(a.name);  // the aclnn API of the operator: aten::mm -> aclnnMm
    type[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(type[0])));
    libkineto::GenericTraceActivity launch(npu_span(), ActivityType::PRIVATEUSE1_RUNTIME, "aclnn" + type);
    launch.startTime = start;
    launch.endTime = start + (a.end_ns - a.start_ns);
    launch.device = op.deviceId();
    launch.resource = op.resourceId();
    launch.id = id;
    launch.linked = &op;
    set_flow(launch, a.correlation, true);
    launch.log(logger);
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
    static const std::set<ActivityType> types{ActivityType::CONCURRENT_KERNEL, ActivityType::PRIVATEUSE1_RUNTIME};
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
