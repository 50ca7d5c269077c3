// What real hardware would run on the CPU: operators that, on the chosen torch_npu release, have a CPU
// kernel but no NPU kernel and reach torch_npu's CPU fallback. The set comes from an operator-support
// profile (torch_npu/_op_support.py) before any operator runs; each operator's membership is decided
// once, in its OpFacts, so operators outside the set pay one predictable branch.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace vnpu {

struct OpFacts;

// handler(name) is called on every fallback operator call and returns "" to continue or the message of
// the error to raise instead (TORCH_NPU_FALLBACK_CPU_DISABLE=1).
using CpuFallbackHandler = std::function<std::string(const std::string&)>;

// reports: {operator: the name the fallback reports it under}. On the card a structured operator without an NPU
// kernel runs through its out= variant, and it is that variant that falls back ("aten::fmax" -> "aten::fmax.out").
void set_cpu_fallback_operators(const std::map<std::string, std::string>& reports, CpuFallbackHandler handler);
bool is_cpu_fallback_operator(const std::string& name);
const std::string& cpu_fallback_report_name(const std::string& name);
void report_cpu_fallback(const OpFacts& facts);

}  // namespace vnpu
