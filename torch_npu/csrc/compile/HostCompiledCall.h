// Running code compiled for the host (torch.compile's inductor kernels) on npu tensors.
//
// npu memory is host memory, so vnpu compiles npu graphs as CPU graphs and runs the result on CPU
// aliases of the npu tensors: inputs are aliased without copying, everything the code allocates
// comes from the npu device's pools (memory statistics, capacity and OOM see it), and the results
// become npu tensors again (views of inputs stay views, new buffers are taken over).
#pragma once

#include "aten/TensorMapping.h"
#include "runtime/CachingAllocator.h"

#include <ATen/core/Tensor.h>

#include <optional>

namespace vnpu {

// Marks, on this thread, a call of host-compiled code for an npu graph: torch_npu's operators
// accept CPU tensors (the aliases) only inside one.
class HostCompiledRegion {
 public:
  HostCompiledRegion();
  ~HostCompiledRegion();
  HostCompiledRegion(const HostCompiledRegion&) = delete;
  HostCompiledRegion& operator=(const HostCompiledRegion&) = delete;
  static bool active();

 private:
  bool previous_;
};

// One call of host-compiled code: alias the inputs, run inside `Running`, map the results.
class HostCompiledCall {
 public:
  explicit HostCompiledCall(c10::DeviceIndex device);
  // The tensor the compiled code receives for input `position` (a CPU alias of an npu tensor).
  at::Tensor input(const at::Tensor& tensor, int position);

  // While alive: allocations come from the device's pools, torch_npu operators accept the aliases.
  struct Running {
    explicit Running(c10::DeviceIndex device) : pools(device, PoolUse::kProgram) {}
    DevicePoolScope pools;
    HostCompiledRegion region;
  };
  c10::DeviceIndex device() const {
    return map_.device;
  }

  // After the call: in-place resizes of inputs reach the npu tensors; a result becomes an npu tensor.
  void finish_inputs(size_t count);
  at::Tensor result(const at::Tensor& tensor);

 private:
  CallMapping map_;
};

}  // namespace vnpu
