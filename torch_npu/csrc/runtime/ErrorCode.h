#pragma once

#include <string>

namespace vnpu {

// torch_npu's error-code suffix, as torch_npu/utils/_error_code.py formats it:
// "\n[ERROR] <time> (PID:.., Device:.., RankID:..) ERR<submodule:02><code:03> <SUBMODULE> <message>"
// (TORCH_NPU_COMPACT_ERROR_OUTPUT=1 keeps the tag only).
enum class SubModule { kPta = 0, kOps = 1, kDist = 2 };

constexpr int kErrParam = 1;
constexpr int kErrType = 2;
constexpr int kErrValue = 3;
constexpr int kErrInternal = 5;
constexpr int kErrNotSupport = 7;
constexpr int kErrSyscall = 10;

std::string error_suffix(SubModule submodule, int code, const char* message);

// The usual OPS suffixes: ERR01001 (invalid parameter), ERR01002 (invalid type), ERR01003 (invalid value) and
// ERR01007 (feature not supported).
std::string ops_param_error();
std::string ops_type_error();
std::string ops_value_error();
std::string ops_not_supported_error();

}  // namespace vnpu
