// The npu device-activity plugin of PyTorch's kineto profiler (see KinetoNpuProfiler.cpp).
#pragma once

namespace vnpu {

// Registers the plugin with libkineto; called once when torch_npu._C is imported.
void register_kineto_npu_profiler();

}  // namespace vnpu
