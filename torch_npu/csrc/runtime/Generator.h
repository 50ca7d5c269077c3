// npu random number generators. Each npu generator owns a CPU engine that carries its state; the
// redirect hands that engine to the CPU kernels of random operators, so npu random streams are
// their own (independent of CPU draws and of other devices) and reproducible per seed.
#pragma once

#include <ATen/core/Generator.h>

namespace vnpu {

const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);
bool is_npu_generator(const at::Generator& generator);
// The CPU engine behind an npu generator.
at::Generator engine_of(const at::Generator& npu_generator);

}  // namespace vnpu
