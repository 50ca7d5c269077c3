#include "profiler/ActivityRecorder.h"

#include "aten/OpHooks.h"
#include "runtime/CachingAllocator.h"
#include "runtime/ProfilerCorrelation.h"
#include "runtime/Stream.h"

#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>

#include <functional>
#include <memory>
#include <mutex>

namespace vnpu {
namespace {

TensorMeta meta_of(const at::Tensor& t) {
  TensorMeta m;
  m.shape = t.sizes().vec();
  m.dtype = c10::toString(t.scalar_type());
  if (t.device().type() == c10::DeviceType::PrivateUse1 && t.has_storage()) {
    m.format = storage_format(t.storage().data_ptr()).first;
    if (m.format < 0) {  // no private format: the rank default torch_npu.get_npu_format reports
      m.format = t.dim() == 4 ? 0 : t.dim() == 5 ? 30 : 2;  // NCHW, NCDHW, ND
    }
  }
  return m;
}

void collect(const std::vector<c10::IValue>& values, std::vector<TensorMeta>& out) {
  for (const auto& v : values) {
    if (v.isTensor()) {
      if (v.toTensor().defined()) {
        out.push_back(meta_of(v.toTensor()));
      }
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) {
        out.push_back(meta_of(t));
      }
    }
  }
}

// A copy operator with tensors on both the host and an npu.
bool crosses_host_and_device(const OpCall& call) {
  if (call.facts.name != "aten::copy_" && call.facts.name != "aten::_to_copy") {
    return false;
  }
  bool host = false, device = false;
  for (const auto* values : {&call.inputs, &call.outputs}) {
    for (const auto& v : *values) {
      if (v.isTensor() && v.toTensor().defined()) {
        (v.toTensor().device().type() == c10::DeviceType::PrivateUse1 ? device : host) = true;
      }
    }
  }
  return host && device;
}

}  // namespace

void ActivityRecorder::after(const OpCall& call) {
  Activity a;
  a.name = call.facts.name;
  a.start_ns = call.start_ns;
  a.end_ns = call.end_ns;
  a.device = static_cast<int>(call.device);
  a.stream = call.device >= 0 ? current_stream(call.device).id() : 0;
  a.thread = at::RecordFunction::currentThreadId();  // the id the profiler gives host events
  a.cpu_fallback = call.facts.cpu_fallback;
  a.cube = call.facts.cube_class != CubeClass::None;
  a.memcpy = crosses_host_and_device(call);
  a.correlation = current_correlation();
  if (record_shapes_) {
    collect(call.inputs, a.inputs);
    collect(call.outputs, a.outputs);
  }
  std::lock_guard<std::mutex> guard(mu_);
  activities_.push_back(std::move(a));
}

std::vector<Activity> ActivityRecorder::take() {
  std::lock_guard<std::mutex> guard(mu_);
  return std::move(activities_);
}

namespace {

HookSession<ActivityRecorder>& session() {
  static auto* s = new HookSession<ActivityRecorder>();
  return *s;
}

}  // namespace

void start_activity_recording(bool record_shapes) {
  session().start(record_shapes);
}

std::vector<Activity> stop_activity_recording() {
  auto recorder = session().stop();
  return recorder ? recorder->take() : std::vector<Activity>{};
}

bool activity_recording() {
  return session().active();
}

}  // namespace vnpu
