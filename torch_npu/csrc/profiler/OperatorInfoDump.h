// Operator information statistics (ACL's aclopStartDumpArgs / aclopStopDumpArgs, torch_npu._C._aclop_start_dump
// / _aclop_stop_dump): while a session runs, every npu operator call with a shape, dtype, format or attribute
// not seen before in it is kept once, in C++ on the operator path; stopping hands the distinct calls over
// (torch_npu/npu/_op_info_dump.py writes one file per call, as ACL writes one per operator shape).
#pragma once

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <string>
#include <vector>

namespace vnpu {

struct OperatorTensorInfo {
  std::string name;  // the schema's argument name ("result", "result0", ... for returns)
  c10::ScalarType dtype;
  std::vector<int64_t> shape;
  int32_t format;  // torch_npu.Format (ACL's aclFormat), the storage's or the rank's default
};

struct OperatorInfo {
  std::string op;  // "aten::add.Tensor"
  std::vector<OperatorTensorInfo> inputs;
  std::vector<OperatorTensorInfo> outputs;
  std::vector<std::pair<std::string, c10::IValue>> attrs;  // the non-tensor arguments
};

void start_operator_info_dump();
// Stops the session; its distinct operator calls in the order they first ran (empty when none ran).
std::vector<OperatorInfo> stop_operator_info_dump();
bool operator_info_dump_active();

}  // namespace vnpu
