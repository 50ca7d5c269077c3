// Recurrent layers (LSTM, GRU, RNN) computed as the CPU computes them.
//
// aten::lstm / gru / rnn_tanh / rnn_relu (and their *_cell forms) are composites that branch on the device: on the CPU
// they project the inputs of all time steps in one matmul (or run oneDNN's RNN), elsewhere they call a fused cell per
// step. npu runs the CPU's kernels, so it takes the CPU's branch: the layer runs on CPU aliases of the npu tensors,
// with the CPU's autograd graph recorded on those aliases, and the npu results get one backward node that replays that
// graph (grads in, grads out, zero-copy). Training with inter-layer dropout keeps the per-step path so dropout draws
// from the npu generator; planning mode takes it too.
#include "aten/Redirect.h"
#include "aten/TensorMapping.h"
#include "runtime/CachingAllocator.h"
#include "runtime/Device.h"
#include "runtime/HostMemory.h"

#include <ATen/SequenceNumber.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/library.h>

#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace vnpu {
namespace {

using torch::autograd::variable_list;

// Gradients a recorded CPU graph sends to the aliases of the npu leaves, one per use of a leaf, in the order the
// CPU's engine delivers them.
struct Deliveries {
  std::vector<std::vector<at::Tensor>> per_leaf;
};

// Stands in the CPU graph where an alias's AccumulateGrad was: records what one use of the leaf contributes.
struct DeliveryCapture final : torch::autograd::Node {
  std::shared_ptr<Deliveries> deliveries;
  size_t leaf = 0;

  DeliveryCapture(std::shared_ptr<Deliveries> deliveries_, size_t leaf_)
      : Node(/*sequence_nr=*/UINT64_MAX), deliveries(std::move(deliveries_)), leaf(leaf_) {}

  std::string name() const override {
    return "HostRecurrentGradCapture";
  }

  variable_list apply(variable_list&& grads) override {
    deliveries->per_leaf[leaf].push_back(std::move(grads[0]));
    return {};
  }
};

// The backward of one recurrent layer call: the CPU graph recorded on the aliases, run again.
//
// A leaf the layer uses more than once (a bidirectional layer projects its input once per direction) gets one edge
// per use, and each edge carries that use's gradient as the CPU's engine delivered it: npu's engine then adds the
// contributions to the leaf's gradient one by one, interleaved with the other operators' exactly as on the CPU,
// where one summed gradient would round differently.
struct HostGraphBackward final : torch::autograd::Node {
  std::vector<at::Tensor> cpu_outputs;
  std::shared_ptr<Deliveries> deliveries = std::make_shared<Deliveries>();
  std::vector<size_t> uses;  // per leaf: how many edges it has (in edge order)
  c10::DeviceIndex device = 0;
  bool released = false;  // the CPU graph was freed after a backward without retain_graph
  std::mutex replay_mutex;

  std::string name() const override {
    return "HostRecurrentBackward";
  }

  variable_list apply(variable_list&& grads) override {
    TORCH_CHECK(!released,
                "Trying to backward through the graph a second time (or directly access saved tensors after they "
                "have already been freed). Saved intermediate values of the graph are freed when you call "
                ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
                "graph a second time or if you need to access saved tensors after calling backward.");
    torch::autograd::edge_list roots;
    variable_list output_grads;
    for (size_t i = 0; i < grads.size() && i < cpu_outputs.size(); ++i) {
      if (grads[i].defined() && cpu_outputs[i].requires_grad()) {
        roots.push_back(torch::autograd::impl::gradient_edge(cpu_outputs[i]));
        output_grads.push_back(grads[i].device().type() == kNpu ? owning_cpu_alias(grads[i]) : grads[i]);
      }
    }
    variable_list result(num_outputs());
    if (roots.empty()) {
      return result;
    }
    std::lock_guard<std::mutex> lock(replay_mutex);
    for (auto& arrived : deliveries->per_leaf) {
      arrived.clear();
    }
    {
      DevicePoolScope scope(device);
      // Every AccumulateGrad of the graph was replaced by a capture, so "accumulate" accumulates nothing.
      torch::autograd::Engine::get_default_engine().execute(roots, output_grads, /*keep_graph=*/true,
                                                            /*create_graph=*/false, /*accumulate_grad=*/true);
    }
    size_t slot = 0;
    for (size_t leaf = 0; leaf < uses.size(); ++leaf) {
      auto& arrived = deliveries->per_leaf[leaf];
      for (size_t k = 0; k < uses[leaf]; ++k, ++slot) {
        if (k < arrived.size() && arrived[k].defined()) {
          result[slot] = adopt_cpu_result(arrived[k], device);
        }
      }
      arrived.clear();
    }
    return result;
  }

  void release_variables() override {
    cpu_outputs.clear();
    released = true;
  }
};

// Rewires the graph recorded since `first_sequence_nr` so that each use of an alias leaf feeds its own capture, and
// cuts every edge leading out of the call (nothing outside it receives a gradient from the replay). Returns the number
// of uses per leaf.
std::vector<size_t> capture_leaf_uses(const std::vector<at::Tensor>& cpu_outputs,
                                      const std::vector<at::Tensor>& cpu_leaves, uint64_t first_sequence_nr,
                                      const std::shared_ptr<Deliveries>& deliveries) {
  std::unordered_map<const torch::autograd::Node*, size_t> leaf_of;
  for (size_t i = 0; i < cpu_leaves.size(); ++i) {
    leaf_of[torch::autograd::impl::grad_accumulator(cpu_leaves[i]).get()] = i;
  }
  std::vector<size_t> uses(cpu_leaves.size(), 0);
  deliveries->per_leaf.assign(cpu_leaves.size(), {});
  std::vector<torch::autograd::Node*> stack;
  std::unordered_set<torch::autograd::Node*> seen;
  for (const auto& out : cpu_outputs) {
    if (auto* fn = out.grad_fn().get(); fn != nullptr && seen.insert(fn).second) {
      stack.push_back(fn);
    }
  }
  while (!stack.empty()) {
    torch::autograd::Node* node = stack.back();
    stack.pop_back();
    // Edges are rewritten in place: set_next_edge() would recompute topological numbers, which autograd forbids once
    // a node has a parent; a capture (topological number 0) keeps every parent's number valid.
    for (auto& edge : node->next_edges()) {
      torch::autograd::Node* next = edge.function.get();
      if (next == nullptr) {
        continue;
      }
      if (auto leaf = leaf_of.find(next); leaf != leaf_of.end()) {
        auto capture = c10::make_intrusive<DeliveryCapture>(deliveries, leaf->second);
        capture->add_input_metadata(cpu_leaves[leaf->second]);
        edge = torch::autograd::Edge(std::move(capture), 0);
        ++uses[leaf->second];
      } else if (next->sequence_nr() < first_sequence_nr || next->sequence_nr() == UINT64_MAX) {
        edge = torch::autograd::Edge();
      } else if (seen.insert(next).second) {
        stack.push_back(next);
      }
    }
  }
  return uses;
}

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
  // torch.jit.trace records the cells (never the layers, whose node it records itself) as the operators their
  // composite calls, so under a trace the cells take the composite too.
  if (trains_with_dropout(schema, *stack, base) || plan_mode() || torch::jit::tracer::isTracing()) {
    // The composite itself (found in the CPU slot): its operators dispatch on the npu tensors (in planning
    // mode each of them plans: the CPU's branch would compute on memory the host never backs).
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
    if (t.requires_grad()) {
      // under no_grad too: the CPU's composites read the flag (matmul folds a batched input into one mm when the
      // weight requires grad), and the CPU's parameters carry it there
      alias.requires_grad_(true);
      if (grad_mode) {
        npu_leaves.push_back(t);
        cpu_leaves.push_back(alias);
      }
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
  const uint64_t first_sequence_nr = at::sequence_number::peek();
  {
    DevicePoolScope scope(device);
    op.callBoxed(stack);
  }
  const size_t nret = schema.returns().size();
  c10::intrusive_ptr<HostGraphBackward> node;
  if (!npu_leaves.empty()) {
    node = c10::make_intrusive<HostGraphBackward>();
    node->device = device;
    for (size_t r = stack->size() - nret; r < stack->size(); ++r) {
      node->cpu_outputs.push_back((*stack)[r].toTensor());  // held first: npu results share, never take over, memory
    }
    node->uses = capture_leaf_uses(node->cpu_outputs, cpu_leaves, first_sequence_nr, node->deliveries);
    torch::autograd::edge_list edges;
    for (size_t leaf = 0; leaf < npu_leaves.size(); ++leaf) {
      const auto edge = torch::autograd::impl::gradient_edge(npu_leaves[leaf]);
      edges.insert(edges.end(), node->uses[leaf], edge);
    }
    node->set_next_edges(std::move(edges));
  }
  for (size_t r = stack->size() - nret; r < stack->size(); ++r) {
    at::Tensor cpu = (*stack)[r].toTensor();
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
