// What real hardware would run on the CPU: operators that, on the chosen torch_npu release, have a CPU
// kernel but no NPU kernel and reach torch_npu's CPU fallback. The set comes from an operator-support
// profile (torch_npu/_op_support.py) before any operator runs; each operator's membership is decided
// once, in its OpFacts, so operators outside the set pay one predictable branch.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace vnpu {

struct OpFacts;

// handler(name) is called on every fallback operator call and returns "" to continue or the message of
// the error to raise instead (TORCH_NPU_FALLBACK_CPU_DISABLE=1).
using CpuFallbackHandler = std::function<std::string(const std::string&)>;

void set_cpu_fallback_operators(const std::vector<std::string>& names, CpuFallbackHandler handler);
bool is_cpu_fallback_operator(const std::string& name);
void report_cpu_fallback(const OpFacts& facts);

}  // namespace vnpu
