#include "runtime/SocProfile.h"

#include <c10/util/Exception.h>

#include <cctype>
#include <cstdlib>

namespace vnpu {
namespace {

constexpr int64_t kGiB = int64_t(1) << 30;
constexpr int64_t kMiB = int64_t(1) << 20;

// Nominal public figures per SoC (per die for the Atlas A3 parts). torch_npu orders SoCs as in
// its SocVersion enum: 910A-class parts first, then 310P, 910B, 310B and the A3 (910_93xx) parts.
const std::vector<SocProfile>& table() {
  static const std::vector<SocProfile> socs = {
      {"Ascend910A", 3, 32 * kGiB, 32, 0, 32 * kMiB, 256.0, 1200.0},
      {"Ascend910ProB", 4, 32 * kGiB, 30, 0, 32 * kMiB, 240.0, 1200.0},
      {"Ascend310P3", 12, 24 * kGiB, 8, 7, 8 * kMiB, 88.0, 204.8},
      {"Ascend910B1", 220, 64 * kGiB, 24, 48, 192 * kMiB, 414.0, 1600.0},
      {"Ascend910B2", 221, 64 * kGiB, 24, 48, 192 * kMiB, 376.0, 1600.0},
      {"Ascend910B2C", 222, 64 * kGiB, 24, 48, 192 * kMiB, 376.0, 1600.0},
      {"Ascend910B3", 223, 64 * kGiB, 20, 40, 192 * kMiB, 313.0, 1600.0},
      {"Ascend910B4", 224, 32 * kGiB, 20, 40, 96 * kMiB, 280.0, 800.0},
      {"Ascend910B4-1", 225, 64 * kGiB, 20, 40, 96 * kMiB, 280.0, 1600.0},
      {"Ascend910_9391", 250, 64 * kGiB, 24, 48, 192 * kMiB, 376.0, 1600.0},
      {"Ascend910_9392", 251, 64 * kGiB, 24, 48, 192 * kMiB, 376.0, 1600.0},
      {"Ascend910_9381", 252, 64 * kGiB, 24, 48, 192 * kMiB, 350.0, 1600.0},
      {"Ascend910_9382", 253, 64 * kGiB, 24, 48, 192 * kMiB, 350.0, 1600.0},
      {"Ascend910_9372", 254, 64 * kGiB, 20, 40, 192 * kMiB, 313.0, 1600.0},
      {"Ascend910_9362", 255, 64 * kGiB, 18, 36, 192 * kMiB, 280.0, 1600.0},
  };
  return socs;
}

const SocProfile& find_profile() {
  const char* env = std::getenv("VNPU_SOC");
  std::string want = env != nullptr && *env != '\0' ? env : "Ascend910B1";
  for (const auto& soc : table()) {
    if (want == soc.name) {
      return soc;
    }
  }
  std::string names;
  for (const auto& soc : table()) {
    names += names.empty() ? "" : ", ";
    names += soc.name;
  }
  TORCH_CHECK_VALUE(false, "VNPU_SOC='", want, "' is not a SoC vnpu can model. Choose one of: ", names);
}

// VNPU_DEVICE_MEMORY: an integer number of bytes, or a number with a unit (KB, MB, GB, KiB, MiB, GiB).
int64_t parse_memory_override() {
  const char* env = std::getenv("VNPU_DEVICE_MEMORY");
  if (env == nullptr || *env == '\0') {
    return -1;
  }
  std::string s(env);
  size_t pos = 0;
  while (pos < s.size() && (std::isdigit(static_cast<unsigned char>(s[pos])) || s[pos] == '.')) {
    ++pos;
  }
  std::string number = s.substr(0, pos);
  std::string unit = s.substr(pos);
  for (auto& ch : unit) {
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  double scale = 0;
  if (unit.empty() || unit == "b")
    scale = 1;
  else if (unit == "kb" || unit == "kib" || unit == "k")
    scale = 1024.0;
  else if (unit == "mb" || unit == "mib" || unit == "m")
    scale = 1024.0 * 1024.0;
  else if (unit == "gb" || unit == "gib" || unit == "g")
    scale = 1024.0 * 1024.0 * 1024.0;
  else if (unit == "tb" || unit == "tib" || unit == "t")
    scale = 1024.0 * 1024.0 * 1024.0 * 1024.0;
  char* end = nullptr;
  double value = number.empty() ? -1 : std::strtod(number.c_str(), &end);
  TORCH_CHECK_VALUE(scale > 0 && value > 0 && end != nullptr && *end == '\0', "VNPU_DEVICE_MEMORY='", s,
                    "' is invalid: expected a positive size such as 16GB, 512MiB or 1073741824");
  return static_cast<int64_t>(value * scale);
}

}  // namespace

const SocProfile& soc_profile() {
  static const SocProfile& soc = find_profile();
  return soc;
}

const std::vector<SocProfile>& known_socs() {
  return table();
}

int64_t device_capacity() {
  static const int64_t capacity = [] {
    int64_t override_bytes = parse_memory_override();
    return override_bytes > 0 ? override_bytes : soc_profile().total_memory;
  }();
  return capacity;
}

bool soc_supports_bf16(const SocProfile& soc) {
  return soc.version >= 220;  // Ascend910B1 and later
}

}  // namespace vnpu
