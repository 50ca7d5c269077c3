// torch_npu's option store (_npu_setOption / _npu_getOption): string keys and values that the
// Python configuration APIs write (ACL_PRECISION_MODE, ALLOW_MATMUL_HF32, jitCompile...).
#pragma once

#include <map>
#include <optional>
#include <string>

namespace vnpu {

void set_options(const std::map<std::string, std::string>& options);
std::optional<std::string> get_option(const std::string& key);
std::map<std::string, std::string> all_options();

}  // namespace vnpu
