// Whether this machine's memory can back a new npu segment. Every npu byte lives in host memory,
// and the SoC profile may promise more (64 GiB per device) than the host has: the allocator asks
// here first so an oversized request raises the NPU OOM error instead of waking the OS OOM killer.
#pragma once

#include <cstddef>
#include <string>

namespace vnpu {

// `mapped` is what the npu pools already hold. On refusal `note` explains it for the OOM error.
bool host_can_back(size_t bytes, size_t mapped, std::string& note);

// Planning mode (VNPU_PLAN=1, read once): npu segments are address space only, never backed by host
// pages, and operators compute shapes and dtypes only (plan/PlanMode.h).
bool plan_mode();

// Maps `bytes` of address space for a segment: readable and writable memory, or, in planning mode,
// address space the host does not reserve. nullptr when the host refuses.
void* map_segment_memory(size_t bytes);

}  // namespace vnpu
