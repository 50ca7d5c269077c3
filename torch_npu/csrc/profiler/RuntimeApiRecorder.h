// The runtime calls a profiling session sees at the CANN level: synchronisations of the device, a stream
// or an event, event record / wait / create / destroy and stream creation, each named by the AscendCL
// API torch_npu calls for it (aclrtSynchronizeStream, ...) and stamped on the steady clock of now_ns().
// Fed by the runtime's trace points (runtime/DeviceTrace.h) while recording; vnpu's operators have
// already run when a synchronisation is called, so its duration is the runtime's own, not a wait.
// With ASCEND_LAUNCH_BLOCKING=1 every operator is followed by the aclrtSynchronizeStream torch_npu makes.
#pragma once

#include <cstdint>
#include <vector>

namespace vnpu {

struct RuntimeApiCall {
  const char* name;  // "aclrtSynchronizeStream"
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t thread = 0;  // at::RecordFunction::currentThreadId()
  int device = 0;
};

void start_runtime_api_recording();
std::vector<RuntimeApiCall> stop_runtime_api_recording();

}  // namespace vnpu
