// PyTorch's privateuse1 profiler stubs for npu (see ProfilerStubs.cpp).
#pragma once

namespace vnpu {

// Registers the stubs with PyTorch's profiler; called once when torch_npu._C is imported.
void register_profiler_stubs();

}  // namespace vnpu
