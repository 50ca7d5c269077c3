#include "aten/CpuFallback.h"

#include "aten/OpFacts.h"

#include <c10/util/Exception.h>

#include <unordered_map>

namespace vnpu {
namespace {

std::unordered_map<std::string, std::string>& fallback_names() {
  static auto* names = new std::unordered_map<std::string, std::string>();
  return *names;
}

std::string qualified(const std::string& name) {
  return name.rfind("aten::", 0) == 0 ? name : "aten::" + name;
}

CpuFallbackHandler& fallback_handler() {
  static auto* handler = new CpuFallbackHandler();
  return *handler;
}

}  // namespace

void set_cpu_fallback_operators(const std::map<std::string, std::string>& reports, CpuFallbackHandler handler) {
  auto& names = fallback_names();
  names.clear();
  for (const auto& [name, reported] : reports) {
    names.emplace(qualified(name), qualified(reported));
  }
  fallback_handler() = std::move(handler);
}

bool is_cpu_fallback_operator(const std::string& name) {
  const auto& names = fallback_names();
  return !names.empty() && names.count(name) > 0;
}

const std::string& cpu_fallback_report_name(const std::string& name) {
  const auto& names = fallback_names();
  const auto found = names.find(name);
  return found == names.end() ? name : found->second;
}

void report_cpu_fallback(const OpFacts& facts) {
  const auto& handler = fallback_handler();
  if (!handler) {
    return;
  }
  const std::string refusal = handler(facts.fallback_name);
  TORCH_CHECK(refusal.empty(), refusal);
}

}  // namespace vnpu
