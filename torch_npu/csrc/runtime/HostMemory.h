// Whether this machine's memory can back a new npu segment. Every npu byte lives in host memory,
// and the SoC profile may promise more (64 GiB per device) than the host has: the allocator asks
// here first so an oversized request raises the NPU OOM error instead of waking the OS OOM killer.
#pragma once

#include <cstddef>
#include <string>

namespace vnpu {

// `mapped` is what the npu pools already hold. On refusal `note` explains it for the OOM error.
bool host_can_back(size_t bytes, size_t mapped, std::string& note);

}  // namespace vnpu
