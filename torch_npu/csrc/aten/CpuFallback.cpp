#include "aten/CpuFallback.h"

#include "aten/OpFacts.h"

#include <c10/util/Exception.h>

#include <unordered_set>

namespace vnpu {
namespace {

std::unordered_set<std::string>& fallback_names() {
  static auto* names = new std::unordered_set<std::string>();
  return *names;
}

CpuFallbackHandler& fallback_handler() {
  static auto* handler = new CpuFallbackHandler();
  return *handler;
}

}  // namespace

void set_cpu_fallback_operators(const std::vector<std::string>& names, CpuFallbackHandler handler) {
  auto& set = fallback_names();
  set.clear();
  for (const auto& name : names) {
    set.insert(name.rfind("aten::", 0) == 0 ? name : "aten::" + name);
  }
  fallback_handler() = std::move(handler);
}

bool is_cpu_fallback_operator(const std::string& name) {
  const auto& set = fallback_names();
  return !set.empty() && set.count(name) > 0;
}

void report_cpu_fallback(const OpFacts& facts) {
  const auto& handler = fallback_handler();
  if (!handler) {
    return;
  }
  const std::string refusal = handler(facts.name);
  TORCH_CHECK(refusal.empty(), refusal);
}

}  // namespace vnpu
