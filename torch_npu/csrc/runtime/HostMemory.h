// Whether this machine's memory can back a new npu segment. Every npu byte lives in host memory,
// and the SoC profile may promise more (64 GiB per device) than the host has: the allocator asks
// here first so an oversized request raises the NPU OOM error instead of waking the OS OOM killer.
#pragma once

#include <cstddef>
#include <string>

namespace vnpu {

// `mapped` is what the npu pools already hold. On refusal `note` explains it for the OOM error.
bool host_can_back(size_t bytes, size_t mapped, std::string& note);

// Whether the host can hold `bytes` more of its own memory for a copy of npu memory to the CPU. A copy that fits
// beside a card's memory may not fit beside vnpu's, which is host memory too; the copy then raises the CPU
// allocator's error with `note` instead of waking the OS OOM killer.
bool host_can_hold_copy(size_t bytes, std::string& note);

// Planning mode (VNPU_PLAN=1, read once): npu segments are address space only, never backed by host
// pages, and operators compute shapes and dtypes only (plan/PlanMode.h). Inline: every allocation asks.
bool read_plan_mode();
inline bool plan_mode() {
  static const bool on = read_plan_mode();
  return on;
}

// In planning mode with VNPU_PLAN_OVER_CAPACITY=1 (what `vnpu plan` sets): a request the card cannot
// hold, even after the allocator released its cache, gets its segment anyway instead of the OOM error,
// and the planning ledger records where the card would have run out (plan/PlanMemory.h), so one run
// tells both whether the job fits and by how much it does not.
bool plan_over_capacity();

// Maps `bytes` of address space for a segment: readable and writable memory in the segment arena (other
// processes of this host can map it, SegmentArena.h), private memory where the arena cannot be had, or, in
// planning mode, address space the host does not reserve. nullptr when the host refuses.
void* map_segment_memory(size_t bytes);

// Gives a segment of map_segment_memory back to the host.
void unmap_segment_memory(void* ptr, size_t bytes);

}  // namespace vnpu
