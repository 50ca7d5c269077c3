// AOTInductor models compiled for npu (torch._inductor.aoti_compile_and_package on npu inputs).
//
// vnpu compiles an npu graph as the CPU graph it computes (torch_npu/_inductor/host_compile.py), so an npu
// model's shared library is a CPU model: this runner loads it as PyTorch's CPU runner does and runs it as
// torch.compile's host-compiled code runs: npu inputs reach the model as CPU aliases of their memory, the
// buffers and outputs it allocates come from the npu device's pools, and the outputs are npu tensors. It is
// registered for the device key "npu" (what aoti_load_package looks up) and bound as torch_npu's
// torch._C._aoti.AOTIModelContainerRunnerNpu.
#pragma once

#include <c10/core/Device.h>
#include <torch/csrc/inductor/aoti_runner/model_container_runner_cpu.h>

#include <string>
#include <unordered_map>
#include <vector>

namespace vnpu {

class NpuModelContainerRunner : public torch::inductor::AOTIModelContainerRunnerCpu {
 public:
  // device_str: "npu" (the inputs' device) or "npu:<index>".
  NpuModelContainerRunner(const std::string& model_so_path, size_t num_models, const std::string& device_str,
                          bool run_single_threaded);

  // The model's constants as npu tensors over their memory.
  std::unordered_map<std::string, at::Tensor> npu_constants(bool use_inactive) const;
  // Constants given as npu tensors reach the model as CPU aliases that keep them alive.
  void update_npu_constants(const std::unordered_map<std::string, at::Tensor>& tensors, bool use_inactive,
                            bool validate_full_updates, bool user_managed);

 protected:
  std::vector<at::Tensor> run_impl(std::vector<AtenTensorHandle>& input_handles, void* stream_handle) override;

 private:
  c10::DeviceIndex device_of(const std::vector<at::Tensor>& inputs) const;
  c10::DeviceIndex device_;
};

}  // namespace vnpu
