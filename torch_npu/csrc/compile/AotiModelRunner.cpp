// AOTInductor models compiled for npu (torch._inductor.aoti_compile_and_package on npu inputs), loaded
// by torch._inductor.aoti_load_package through the runner registered here for the device key "npu".
//
// vnpu compiles an npu graph as the CPU graph it computes (torch_npu/_inductor/host_compile.py), so the
// package holds a CPU model: this runner loads it as PyTorch's CPU runner does and runs it as
// torch.compile's host-compiled code runs: npu inputs reach the model as CPU aliases of their memory,
// the buffers and outputs it allocates come from the npu device's pools, and the outputs are npu tensors.
#include "compile/HostCompiledCall.h"
#include "runtime/Device.h"
#include "runtime/ErrorCode.h"

#include <c10/core/Device.h>
#include <torch/csrc/inductor/aoti_runner/model_container_runner_cpu.h>
#include <torch/csrc/inductor/aoti_torch/tensor_converter.h>

#include <memory>
#include <string>
#include <vector>

namespace vnpu {
namespace {

class NpuModelContainerRunner : public torch::inductor::AOTIModelContainerRunnerCpu {
 public:
  NpuModelContainerRunner(const std::string& model_so_path, size_t num_models, c10::DeviceIndex device,
                          bool run_single_threaded)
      : AOTIModelContainerRunnerCpu(model_so_path, num_models, run_single_threaded), device_(device) {}

 protected:
  std::vector<at::Tensor> run_impl(std::vector<AtenTensorHandle>& input_handles, void* stream_handle) override {
    // The handles are the model's to consume: take the npu tensors over, hand it handles of their aliases.
    std::vector<at::Tensor> inputs =
        torch::aot_inductor::alloc_tensors_by_stealing_from_handles(input_handles.data(), input_handles.size());
    input_handles.clear();
    HostCompiledCall call(device_of(inputs));
    std::vector<at::Tensor> aliases;
    aliases.reserve(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      TORCH_CHECK(!inputs[i].defined() || inputs[i].device().type() == kNpu,
                  "The AOTInductor model was compiled for npu, but its input ", i, " is on ", inputs[i].device(),
                  ". Move the inputs to npu before calling it.",
                  error_suffix(SubModule::kPta, kErrParam, "invalid parameter"));
      aliases.push_back(call.input(inputs[i], static_cast<int>(i)));
    }
    std::vector<AtenTensorHandle> host_handles = torch::aot_inductor::unsafe_alloc_new_handles_from_tensors(aliases);
    aliases.clear();
    std::vector<at::Tensor> outputs;
    {
      HostCompiledCall::Running running(call.device());
      outputs = AOTIModelContainerRunnerCpu::run_impl(host_handles, stream_handle);
    }
    call.finish_inputs(inputs.size());
    for (auto& output : outputs) {
      output = call.result(output);
    }
    return outputs;
  }

 private:
  // The device the runner was loaded for (aoti_load_package's device_index), else that of the first input.
  c10::DeviceIndex device_of(const std::vector<at::Tensor>& inputs) const {
    if (device_ >= 0) {
      return device_;
    }
    for (const auto& input : inputs) {
      if (input.defined() && input.device().type() == kNpu) {
        return input.device().index();
      }
    }
    return current_device();
  }

  c10::DeviceIndex device_;
};

std::unique_ptr<torch::inductor::AOTIModelContainerRunner> create_npu_runner(const std::string& model_so_path,
                                                                             size_t num_models,
                                                                             const std::string& device_str,
                                                                             const std::string& /*bin_dir*/,
                                                                             const bool run_single_threaded) {
  const c10::Device device(device_str);  // "npu", or "npu:<index>" when the loader was given a device index
  return std::make_unique<NpuModelContainerRunner>(model_so_path, num_models, device.index(), run_single_threaded);
}

const torch::inductor::RegisterAOTIModelRunner register_npu_runner("npu", &create_npu_runner);

}  // namespace
}  // namespace vnpu
