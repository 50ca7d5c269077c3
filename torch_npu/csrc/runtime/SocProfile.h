// The SoC the virtual NPUs model (VNPU_SOC, default Ascend910B1): the numbers torch_npu reports
// for it and the capacity the caching allocator enforces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vnpu {

struct SocProfile {
  const char* name;
  // Order of the SoC in torch_npu's SocVersion enum (features are gated on it).
  int version;
  int64_t total_memory;  // bytes of device memory (HBM)
  int cube_core_num;
  int vector_core_num;
  int64_t l2_cache_size;  // bytes
  double fp16_tflops;     // peak cube throughput, for cost estimates
  double hbm_gbps;        // peak device memory bandwidth, for cost estimates
};

// The active profile. Throws a clear error when VNPU_SOC names an unknown SoC or
// VNPU_DEVICE_MEMORY is malformed.
const SocProfile& soc_profile();
const std::vector<SocProfile>& known_socs();

// Device memory capacity in bytes: the SoC's HBM size unless VNPU_DEVICE_MEMORY overrides it.
int64_t device_capacity();

bool soc_supports_bf16(const SocProfile& soc);

}  // namespace vnpu
