#include "compile/AotiModelRunner.h"

#include "aten/TensorMapping.h"
#include "compile/HostCompiledCall.h"
#include "runtime/Device.h"
#include "runtime/ErrorCode.h"

#include <torch/csrc/inductor/aoti_torch/tensor_converter.h>

#include <memory>

namespace vnpu {

NpuModelContainerRunner::NpuModelContainerRunner(const std::string& model_so_path, size_t num_models,
                                                 const std::string& device_str, bool run_single_threaded)
    : AOTIModelContainerRunnerCpu(model_so_path, num_models, run_single_threaded) {
  const c10::Device device(device_str);
  TORCH_CHECK(device.type() == kNpu, "AOTIModelContainerRunnerNpu runs models on npu, not on ", device_str,
              error_suffix(SubModule::kPta, kErrParam, "invalid parameter"));
  device_ = device.index();
}

std::vector<at::Tensor> NpuModelContainerRunner::run_impl(std::vector<AtenTensorHandle>& input_handles,
                                                          void* stream_handle) {
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

// The device the runner was made for ("npu:<index>"), else that of the first npu input.
c10::DeviceIndex NpuModelContainerRunner::device_of(const std::vector<at::Tensor>& inputs) const {
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

std::unordered_map<std::string, at::Tensor> NpuModelContainerRunner::npu_constants(bool use_inactive) const {
  std::unordered_map<std::string, at::Tensor> constants = extract_constants_map(use_inactive);
  const c10::DeviceIndex device = device_ >= 0 ? device_ : current_device();
  for (auto& [name, tensor] : constants) {
    if (tensor.defined() && tensor.device().is_cpu()) {
      tensor = npu_alias_of_host(tensor, device);
    }
  }
  return constants;
}

void NpuModelContainerRunner::update_npu_constants(const std::unordered_map<std::string, at::Tensor>& tensors,
                                                   bool use_inactive, bool validate_full_updates, bool user_managed) {
  std::unordered_map<std::string, at::Tensor> host;
  for (const auto& [name, tensor] : tensors) {
    host.emplace(name,
                 tensor.defined() && tensor.device().type() == kNpu ? make_cpu_alias(tensor, /*owning=*/true) : tensor);
  }
  update_constant_buffer(host, use_inactive, validate_full_updates, user_managed);
}

namespace {

std::unique_ptr<torch::inductor::AOTIModelContainerRunner> create_npu_runner(const std::string& model_so_path,
                                                                             size_t num_models,
                                                                             const std::string& device_str,
                                                                             const std::string& /*bin_dir*/,
                                                                             const bool run_single_threaded) {
  return std::make_unique<NpuModelContainerRunner>(model_so_path, num_models, device_str, run_single_threaded);
}

const torch::inductor::RegisterAOTIModelRunner register_npu_runner("npu", &create_npu_runner);

}  // namespace
}  // namespace vnpu
