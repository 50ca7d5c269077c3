// Recurrent layers (LSTM, GRU, RNN) computed as the CPU computes them.
//
// aten::lstm / gru / rnn_tanh / rnn_relu (and their *_cell forms) are composites that branch on the device: on the CPU
// they project the inputs of all time steps in one matmul (or run oneDNN's RNN), elsewhere they call a fused cell per
// step. npu runs the CPU's kernels, so it takes the CPU's branch: the layer runs on CPU aliases of the npu tensors,
// with the CPU's autograd graph recorded on those aliases, and the npu results get one backward node that replays that
// graph (grads in, grads out, zero-copy). Training with inter-layer dropout keeps the per-step path so dropout draws
// from the npu generator.
#include "aten/Redirect.h"
#include "aten/TensorMapping.h"
#include "runtime/CachingAllocator.h"
#include "runtime/Device.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/library.h>

namespace vnpu {
namespace {

using torch::autograd::variable_list;

// The backward of one recurrent layer call: the CPU graph recorded on the aliases, run again.
struct HostGraphBackward final : torch::autograd::Node {
  std::vector<at::Tensor> cpu_outputs;
  std::vector<at::Tensor> cpu_leaves;  // aliases of the npu inputs that require grad, in edge order
  c10::DeviceIndex device = 0;
  bool released = false;  // the CPU graph was freed after a backward without retain_graph

  std::string name() const override {
    return "HostRecurrentBackward";
  }

  variable_list apply(variable_list&& grads) override {
    TORCH_CHECK(!released,
                "Trying to backward through the graph a second time (or directly access saved tensors after they "
                "have already been freed). Saved intermediate values of the graph are freed when you call "
                ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
                "graph a second time or if you need to access saved tensors after calling backward.");
    std::vector<at::Tensor> outputs, output_grads;
    for (size_t i = 0; i < grads.size() && i < cpu_outputs.size(); ++i) {
      if (grads[i].defined() && cpu_outputs[i].requires_grad()) {
        outputs.push_back(cpu_outputs[i]);
        output_grads.push_back(grads[i].device().type() == kNpu ? owning_cpu_alias(grads[i]) : grads[i]);
      }
    }
    variable_list result(cpu_leaves.size());
    if (outputs.empty()) {
      return result;
    }
    DevicePoolScope scope(device);
    const auto found = torch::autograd::grad(outputs, cpu_leaves, output_grads, /*retain_graph=*/true,
                                             /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t i = 0; i < found.size(); ++i) {
      if (found[i].defined()) {
        result[i] = adopt_cpu_result(found[i], device);
      }
    }
    return result;
  }

  void release_variables() override {
    cpu_outputs.clear();
    cpu_leaves.clear();
    released = true;
  }
};

bool trains_with_dropout(const c10::FunctionSchema& schema, const torch::jit::Stack& stack, size_t base) {
  double dropout = 0;
  bool train = false;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const auto& name = schema.arguments()[i].name();
    if (name == "dropout") {
      dropout = stack[base + i].toDouble();
    } else if (name == "train") {
      train = stack[base + i].toBool();
    }
  }
  return train && dropout > 0;
}

void host_recurrent(const c10::OperatorHandle& op, c10::DispatchKeySet /*ks*/, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t base = stack->size() - schema.arguments().size();
  if (trains_with_dropout(schema, *stack, base)) {
    // The composite itself (found in the CPU slot): its operators dispatch on the npu tensors.
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
    return;
  }
  const bool grad_mode = at::GradMode::is_enabled();
  c10::DeviceIndex device = -1;
  std::vector<at::Tensor> npu_leaves, cpu_leaves;
  auto to_host = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined() || t.device().type() != kNpu) {
      return t;
    }
    if (device < 0) {
      device = t.device().index();
    }
    at::Tensor alias = owning_cpu_alias(t);
    if (grad_mode && t.requires_grad()) {
      alias.requires_grad_(true);
      npu_leaves.push_back(t);
      cpu_leaves.push_back(alias);
    }
    return alias;
  };
  for (size_t i = base; i < stack->size(); ++i) {
    auto& value = (*stack)[i];
    if (value.isTensor()) {
      value = to_host(value.toTensor());
    } else if (value.isTensorList()) {
      c10::List<at::Tensor> host;
      for (const at::Tensor& t : value.toTensorList()) {
        host.push_back(to_host(t));
      }
      value = std::move(host);
    }
  }
  if (device < 0) {
    device = current_device();
  }
  {
    DevicePoolScope scope(device);
    op.callBoxed(stack);
  }
  const size_t nret = schema.returns().size();
  c10::intrusive_ptr<HostGraphBackward> node;
  if (!npu_leaves.empty()) {
    node = c10::make_intrusive<HostGraphBackward>();
    node->cpu_leaves = cpu_leaves;
    node->device = device;
    node->set_next_edges(torch::autograd::collect_next_edges(npu_leaves));
  }
  for (size_t r = stack->size() - nret; r < stack->size(); ++r) {
    at::Tensor cpu = (*stack)[r].toTensor();
    if (node) {
      node->cpu_outputs.push_back(cpu);  // held first: the npu result shares, never takes over, its memory
    }
    at::Tensor npu = adopt_cpu_result(cpu, device);
    if (node && cpu.requires_grad()) {
      torch::autograd::set_history(npu, c10::intrusive_ptr<torch::autograd::Node>(node));
    } else if (node) {
      node->add_input_metadata(torch::autograd::Node::undefined_input());
    }
    (*stack)[r] = std::move(npu);
  }
}

constexpr const char* kHostRecurrentOps[] = {
    "lstm.input",     "lstm.data",     "gru.input", "gru.data", "rnn_tanh.input", "rnn_tanh.data",
    "rnn_relu.input", "rnn_relu.data", "lstm_cell", "gru_cell", "rnn_tanh_cell",  "rnn_relu_cell",
};

}  // namespace
}  // namespace vnpu

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  for (const char* name : vnpu::kHostRecurrentOps) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&vnpu::host_recurrent>());
  }
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : vnpu::kHostRecurrentOps) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&vnpu::host_recurrent>());
  }
}
