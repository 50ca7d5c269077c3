// The npu device-activity plugin of PyTorch's kineto profiler (see KinetoNpuProfiler.cpp).
#pragma once

namespace vnpu {

// Registers the plugin with libkineto; called once when torch_npu._C is imported.
void register_kineto_npu_profiler();

// torch_npu.profiler runs PyTorch's profiler for its host lanes and only needs the plugin's correlation
// ids (its own recorder has the kernels): it switches the plugin's kernels off meanwhile.
bool kineto_npu_kernels_enabled();
void set_kineto_npu_kernels(bool enabled);

}  // namespace vnpu
