#include "profiler/RuntimeApiRecorder.h"

#include "aten/OpHooks.h"
#include "runtime/Device.h"
#include "runtime/DeviceTrace.h"
#include "runtime/Stream.h"

#include <ATen/record_function.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

namespace vnpu {
namespace {

std::mutex g_mu;
std::vector<RuntimeApiCall> g_calls;

// The AscendCL call torch_npu makes at each trace point; nullptr for points that are no runtime call
// (the caching allocator's blocks and record_stream stay inside torch_npu).
const char* api_name(trace::Point point) {
  switch (point) {
    case trace::Point::EventCreation: return "aclrtCreateEventWithFlag";
    case trace::Point::EventDeletion: return "aclrtDestroyEvent";
    case trace::Point::EventRecord: return "aclrtRecordEvent";
    case trace::Point::EventWait: return "aclrtStreamWaitEvent";
    case trace::Point::StreamCreation: return "aclrtCreateStreamWithConfig";
    case trace::Point::DeviceSynchronization: return "aclrtSynchronizeDevice";
    case trace::Point::StreamSynchronization: return "aclrtSynchronizeStream";
    case trace::Point::EventSynchronization: return "aclrtSynchronizeEvent";
    default: return nullptr;
  }
}

void append(const char* name, int64_t start_ns, int device) {
  RuntimeApiCall call{name};
  call.start_ns = start_ns;
  call.thread = at::RecordFunction::currentThreadId();
  call.device = device;
  call.end_ns = now_ns();
  std::lock_guard<std::mutex> guard(g_mu);
  g_calls.push_back(call);
}

void record(trace::Point point, uintptr_t /*first*/, uintptr_t /*second*/) {
  const char* name = api_name(point);
  if (name != nullptr) {
    append(name, now_ns(), current_device());
  }
}

// With ASCEND_LAUNCH_BLOCKING=1 torch_npu synchronises the stream after every operator it launches.
class LaunchBlockingSync final : public OpHook {
 public:
  void after(const OpCall& call) override {
    if (call.device >= 0) {
      append("aclrtSynchronizeStream", call.end_ns, call.device);
    }
  }
};

bool launch_blocking() {
  const char* env = std::getenv("ASCEND_LAUNCH_BLOCKING");
  return env != nullptr && std::strcmp(env, "1") == 0;
}

HookSession<LaunchBlockingSync>& launch_blocking_session() {
  static auto* s = new HookSession<LaunchBlockingSync>();
  return *s;
}

}  // namespace

void start_runtime_api_recording() {
  {
    std::lock_guard<std::mutex> guard(g_mu);
    g_calls.clear();
  }
  trace::set_handler(trace::Listener::Profiler, &record);
  if (launch_blocking()) {
    launch_blocking_session().start();
  }
}

std::vector<RuntimeApiCall> stop_runtime_api_recording() {
  trace::set_handler(trace::Listener::Profiler, nullptr);
  launch_blocking_session().stop();
  std::lock_guard<std::mutex> guard(g_mu);
  return std::move(g_calls);
}

}  // namespace vnpu
