// Planning mode (VNPU_PLAN=1): a step of a model larger than this host runs in seconds.
//
// npu tensors are allocated by the caching allocator as always (same rounding, segments, pools,
// fragmentation, capacity and OOM rules), but their segments are address space the host never backs
// (runtime/HostMemory.h), and every operator runs its Meta kernel (shapes, dtypes, strides, aliasing)
// instead of computing: arguments become meta tensors that share one meta storage per npu storage,
// fresh results get npu memory from the allocator, views stay views, in-place and out= arguments
// take the kernel's sizes. Whatever needs values (Tensor.item(), copying to the CPU, nonzero,
// data-dependent shapes) raises one error naming the operator and the Python line.
#pragma once

#include "aten/OpFacts.h"
#include "runtime/HostMemory.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace vnpu {

// Runs one operator in planning mode on a boxed stack (arguments in, results out).
void run_plan(const OpFacts& facts, const c10::OperatorHandle& op, torch::jit::Stack* stack);

// One operator as planning mode saw it: argument and result shapes ("2,3;3,4") and dtypes ("float;float"),
// and how many calls had them.
struct PlanLedgerRow {
  std::string op;
  std::string input_shapes;
  std::string input_dtypes;
  std::string output_shapes;
  std::string output_dtypes;
  int64_t calls = 0;
};
std::vector<PlanLedgerRow> plan_ledger();

// In planning mode, labels the npu memory a tensor factory (empty, empty_strided) allocates when no
// operator already does, and names the program line if it makes a new peak. Outside it: nothing.
class PlanFactoryScope {
 public:
  explicit PlanFactoryScope(const char* op);
  ~PlanFactoryScope();
  PlanFactoryScope(const PlanFactoryScope&) = delete;
  PlanFactoryScope& operator=(const PlanFactoryScope&) = delete;

 private:
  bool active_ = false;
  uint64_t generation_ = 0;
};

// A copy in planning mode: small host data keeps its values (plan/PlanValues.h); anything else moves
// nothing (shapes and dtypes are checked), and a copy to the host of a tensor without values raises.
at::Tensor plan_copy(const at::Tensor& self, const at::Tensor& dst, bool non_blocking);

// Raises planning mode's error for `what` (an operator or action that needs values).
[[noreturn]] void plan_needs_values(const std::string& what);

}  // namespace vnpu
