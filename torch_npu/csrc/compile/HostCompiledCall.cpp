#include "compile/HostCompiledCall.h"

#include "runtime/Device.h"

#include <vector>

namespace vnpu {
namespace {

thread_local bool tl_host_region = false;

}  // namespace

HostCompiledRegion::HostCompiledRegion() : previous_(tl_host_region) {
  tl_host_region = true;
}

HostCompiledRegion::~HostCompiledRegion() {
  tl_host_region = previous_;
}

bool HostCompiledRegion::active() {
  return tl_host_region;
}

HostCompiledCall::HostCompiledCall(c10::DeviceIndex device) {
  map_.device = device;
}

at::Tensor HostCompiledCall::input(const at::Tensor& tensor, int position) {
  if (tensor.defined() && tensor.device().type() == kNpu) {
    return map_.alias_input(tensor, position);
  }
  return tensor;
}

void HostCompiledCall::finish_inputs(size_t count) {
  map_.sync_written(std::vector<uint8_t>(count, 1));
}

at::Tensor HostCompiledCall::result(const at::Tensor& tensor) {
  return map_.to_npu(tensor);
}

}  // namespace vnpu
