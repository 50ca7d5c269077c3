#include "runtime/ErrorCode.h"

#include "runtime/Device.h"

#include <c10/util/StringUtil.h>

#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace vnpu {

std::string error_suffix(SubModule submodule, int code, const char* message) {
  static const char* const kNames[] = {"PTA", "OPS", "DIST"};
  const int index = static_cast<int>(submodule);
  char tag[96];
  std::snprintf(tag, sizeof(tag), "ERR%02d%03d %s %s", index, code, kNames[index], message);
  const char* compact = std::getenv("TORCH_NPU_COMPACT_ERROR_OUTPUT");
  if (compact != nullptr && std::string(compact) == "1") {
    return std::string("\n") + tag;
  }
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%d-%H:%M:%S", &local);
  const char* rank = std::getenv("RANK");
  const int device = submodule == SubModule::kDist ? -1 : static_cast<int>(current_device());
  return c10::str("\n[ERROR] ", stamp, " (PID:", getpid(), ", Device:", device, ", RankID:", rank ? rank : "-1", ") ",
                  tag);
}

std::string ops_param_error() {
  return error_suffix(SubModule::kOps, kErrParam, "invalid parameter");
}

std::string ops_type_error() {
  return error_suffix(SubModule::kOps, kErrType, "invalid type");
}

std::string ops_value_error() {
  return error_suffix(SubModule::kOps, kErrValue, "invalid value");
}

std::string ops_not_supported_error() {
  return error_suffix(SubModule::kOps, kErrNotSupport, "feature not supported");
}

}  // namespace vnpu
