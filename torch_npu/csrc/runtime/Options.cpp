#include "runtime/Options.h"

#include <mutex>

namespace vnpu {
namespace {

struct Store {
  std::mutex mu;
  std::map<std::string, std::string> values;
};

Store& store() {
  static auto* s = new Store();
  return *s;
}

}  // namespace

void set_options(const std::map<std::string, std::string>& options) {
  auto& s = store();
  std::lock_guard<std::mutex> guard(s.mu);
  for (const auto& [key, value] : options) {
    s.values[key] = value;
  }
}

std::optional<std::string> get_option(const std::string& key) {
  auto& s = store();
  std::lock_guard<std::mutex> guard(s.mu);
  auto it = s.values.find(key);
  if (it == s.values.end()) {
    return std::nullopt;
  }
  return it->second;
}

std::map<std::string, std::string> all_options() {
  auto& s = store();
  std::lock_guard<std::mutex> guard(s.mu);
  return s.values;
}

}  // namespace vnpu
