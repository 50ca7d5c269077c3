// The hccl backend's silent-data-corruption check (NPU_ASD_ENABLE), as torch_npu's ProcessGroupHCCL runs it:
// while the model is training (torch_npu._C._npu_set_module_train_state("train")), the float32 / bfloat16 tensor a
// rank contributes to a collective is judged by _npu_silent_check_v2 before it is sent — its norm against the
// history the group keeps per kind of collective. Collectives are judged only in the backward call state
// (_npu_set_call_state("backward"), where gradients are exchanged); sent point-to-point tensors always; tensors that
// require grad and one-element allreduces (barriers) never. The NPU_ASD_ENABLE level decides what a fault does
// (see torch_npu/ops/silent_check.py): 1 logs it, 2 stops the collective with an error, 3 also logs normal values.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace vnpu {

// torch_npu._C._npu_set_module_train_state / _npu_set_call_state: process-wide, like the card's model state.
void set_module_train_state(const std::string& state);
void set_call_state(const std::string& state);

// NPU_ASD_UPPER_THRESH / NPU_ASD_SIGMA_THRESH as "<level 1>,<level 2>", read once: each at least 3, level 1
// above level 2, otherwise the defaults (1000000,10000 and 100000,5000).
std::pair<double, double> silent_check_upper_thresholds();
std::pair<double, double> silent_check_sigma_thresholds();

// One process group's histories, one per kind of collective.
class CollectiveSilentCheck {
 public:
  // Judges what this rank sends in `collective` ("allreduce", "send", ...) when the check applies.
  void before(const char* collective, const std::vector<at::Tensor>& tensors);

 private:
  struct History {
    at::Tensor step;  // int64 [1]: checks so far
    at::Tensor sfda;  // float32 [3]: previous, smallest and largest norm
  };
  std::map<std::string, History> histories_;
};

}  // namespace vnpu
