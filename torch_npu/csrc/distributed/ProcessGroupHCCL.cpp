#include "distributed/ProcessGroupHCCL.h"

#include "plan/PlanValues.h"
#include "runtime/HostMemory.h"

#include <Python.h>

#include "distributed/HcclWork.h"
#include "profiler/CollectiveRecorder.h"

#include "aten/TensorMapping.h"
#include "runtime/Device.h"

#include <torch/csrc/distributed/c10d/Types.hpp>

#include <algorithm>
#include <cstdlib>
#include <functional>

namespace vnpu {
namespace {

bool moved_as_bytes(at::ScalarType dtype) {
  // gloo carries no bool or 8-bit float type: these travel as their bytes (reductions are refused for float8)
  return dtype == at::kBool || dtype == at::kFloat8_e4m3fn || dtype == at::kFloat8_e5m2 ||
         dtype == at::kFloat8_e4m3fnuz || dtype == at::kFloat8_e5m2fnuz || dtype == at::kFloat8_e8m0fnu;
}

at::Tensor host(const at::Tensor& t) {
  if (C10_UNLIKELY(plan_mode()) && t.device().type() == kNpu) {
    // Planning mode's transport (PyTorch's FakeProcessGroup) copies between the tensors it is given to
    // mimic a collective: meta tensors keep that from touching (and so backing) npu memory.
    const at::Tensor meta = at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
    return moved_as_bytes(meta.scalar_type()) ? meta.view(at::kByte) : meta;
  }
  at::Tensor alias = t.device().type() == kNpu ? make_cpu_alias(t, /*owning=*/true) : t;
  return moved_as_bytes(alias.scalar_type()) ? alias.view(at::kByte) : alias;
}

// HCCL reads and writes a tensor's memory as one dense block: like torch_npu, refuse strided views (which the
// host alias would otherwise fill in the wrong order).
void check_contiguous(const std::vector<at::Tensor>& tensors) {
  for (const auto& t : tensors) {
    if (!t.is_contiguous(t.suggest_memory_format())) {
      C10_THROW_ERROR(ValueError, "Tensors must be contiguous" + dist_error(kDistType, "invalid type"));
    }
  }
}

std::vector<at::Tensor> hosts(const std::vector<at::Tensor>& tensors) {
  check_contiguous(tensors);
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) {
    out.push_back(host(t));
  }
  return out;
}

std::vector<std::vector<at::Tensor>> hosts(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<std::vector<at::Tensor>> out;
  out.reserve(lists.size());
  for (const auto& l : lists) {  // per-rank lists are copied through a flat buffer: views are fine there
    std::vector<at::Tensor> aliases;
    aliases.reserve(l.size());
    for (const auto& t : l) {
      aliases.push_back(host(t));
    }
    out.push_back(std::move(aliases));
  }
  return out;
}

std::vector<at::Tensor> flat(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> out;
  for (const auto& l : lists) {
    out.insert(out.end(), l.begin(), l.end());
  }
  return out;
}

const char* op_name(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    default: return "UNUSED";
  }
}

// What gloo is asked to do for a reduction, and what is left to do around it.
struct Reduction {
  c10d::ReduceOp gloo_op;
  bool average = false;
  double premultiply = 1.0;
  at::Tensor premultiply_tensor;
};

Reduction reduction_for(const c10d::ReduceOp& op, at::ScalarType dtype) {
  TORCH_CHECK(dtype == at::kBool || !moved_as_bytes(dtype), "HCCL does not reduce ", c10::toString(dtype), " tensors",
              dist_error(kDistType, "invalid type"));
  Reduction r{c10d::ReduceOp(c10d::ReduceOp::SUM)};
  switch (op.op_) {
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(false, "Cannot use ReduceOp.", op_name(op.op_), " with HCCL",
                  dist_error(kDistNotSupport, "feature not supported"));
    case c10d::ReduceOp::AVG:
      r.average = dtype != at::kBool;
      r.gloo_op = c10d::ReduceOp(dtype == at::kBool ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM);
      return r;
    case c10d::ReduceOp::PREMUL_SUM: {
      auto* supplement = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
      TORCH_CHECK(supplement != nullptr, "PREMUL_SUM needs its factor", dist_error(kDistParam, "invalid parameter"));
      if (supplement->tensor_factor.defined()) {
        r.premultiply_tensor = supplement->tensor_factor;
      } else {
        r.premultiply = supplement->double_factor;
      }
      return r;
    }
    case c10d::ReduceOp::SUM:
      r.gloo_op = c10d::ReduceOp(dtype == at::kBool ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM);
      return r;
    case c10d::ReduceOp::PRODUCT:
      r.gloo_op = c10d::ReduceOp(dtype == at::kBool ? c10d::ReduceOp::MIN : c10d::ReduceOp::PRODUCT);
      return r;
    default: r.gloo_op = op; return r;
  }
}

// Premultiplied copies of the inputs (PREMUL_SUM); the inputs themselves when there is nothing to do.
at::Tensor premultiplied(const at::Tensor& t, const Reduction& r) {
  if (r.premultiply_tensor.defined()) {
    return t.mul(r.premultiply_tensor.to(t.device()));
  }
  return r.premultiply == 1.0 ? t : t.mul(r.premultiply);
}

void divide(const std::vector<at::Tensor>& tensors, int size) {
  for (const auto& t : tensors) {
    if (at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type())) {
      t.div_(size);
    } else {
      t.div_(size, "trunc");
    }
  }
}

// The intra-host link's reduction for what gloo would be asked to do; false for anything it does not carry.
bool link_reduce(const c10d::ReduceOp& op, LinkReduce* out) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: *out = LinkReduce::kSum; return true;
    case c10d::ReduceOp::PRODUCT: *out = LinkReduce::kProduct; return true;
    case c10d::ReduceOp::MIN: *out = LinkReduce::kMin; return true;
    case c10d::ReduceOp::MAX: *out = LinkReduce::kMax; return true;
    default: return false;
  }
}

}  // namespace

ProcessGroupHCCL::ProcessGroupHCCL(c10::intrusive_ptr<c10d::Backend> transport, int rank, int size, std::string name)
    : Backend(rank, size), transport_(std::move(transport)), name_(std::move(name)) {
  const char* desync = std::getenv("TORCH_HCCL_DESYNC_DEBUG");
  desync_debug_ = desync != nullptr && std::string(desync) == "1";
}

ProcessGroupHCCL::~ProcessGroupHCCL() {
  // gloo's destructor joins its worker threads, and a worker finishing a work may need the GIL (the work's
  // captured thread-local state can hold Python objects). The last reference often goes away in Python
  // (DDP's reducer, destroy_process_group) with the GIL held: release it while gloo shuts down, or both
  // threads wait for each other forever.
  if (Py_IsInitialized() && PyGILState_Check()) {
    PyThreadState* state = PyEval_SaveThread();
    transport_.reset();
    PyEval_RestoreThread(state);
  } else {
    transport_.reset();
  }
}

std::string ProcessGroupHCCL::comm_name() const {
  return "hccl_" + (getGroupUid().empty() ? std::string("0") : getGroupUid());
}

std::string ProcessGroupHCCL::describe(const char* collective) const {
  const std::string& group = getGroupUid();
  return c10::str(name_, " ", collective, " on group ", group.empty() ? "default_pg" : group, " (rank ", getRank(),
                  " of ", getSize(), ")");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::named(const char* collective, c10::intrusive_ptr<c10d::Work> work,
                                                       std::vector<at::Tensor> results, std::function<void()> after) {
  if (C10_UNLIKELY(plan_mode()) && std::string_view(collective) != "broadcast") {
    for (const auto& t : results) {
      plan_values_lost(t);  // planning mode's transport moves nothing: the results hold no values
    }
  }
  if (intra_host_) {
    last_transport_work_.emplace(work);
  }
  ephemeral_.claim(work);
  return c10::make_intrusive<HcclWork>(std::move(work), describe(collective), std::move(results), std::move(after));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::point_to_point(const char* what, c10::intrusive_ptr<c10d::Work> work,
                                                                std::vector<at::Tensor> results) {
  if (C10_UNLIKELY(plan_mode()) && std::string_view(what) == "recv") {
    for (const auto& t : results) {
      plan_values_lost(t);
    }
  }
  ephemeral_.claim(work);
  return c10::make_intrusive<HcclWork>(std::move(work), describe(what), std::move(results), nullptr);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::on_intra_host(
    const char* collective, const std::function<void(std::chrono::milliseconds)>& run,
    const std::vector<at::Tensor>& results, std::chrono::milliseconds timeout, std::function<void()> after) {
  if (last_transport_work_) {  // earlier transport collectives on these tensors finish first
    if (auto pending = last_transport_work_->lock()) {
      try {
        pending->wait();
      } catch (const std::exception&) {  // reported to whoever waits for that work
      }
    }
    last_transport_work_.reset();
  }
  expire_ephemeral_timeout();
  timeout = (timeout == c10d::kUnsetTimeout ? base_timeout() : timeout) + ephemeral_.active();
  std::exception_ptr error;
  try {
    run(timeout);
  } catch (const std::exception& e) {
    error = std::make_exception_ptr(std::runtime_error(e.what()));
  }
  if (ephemeral_.finished_now()) {  // this collective owned the extension, and it has finished
    apply_timeout();
  }
  return c10::make_intrusive<HcclWork>(c10::make_intrusive<CompletedWork>(results, error), describe(collective),
                                       results, std::move(after));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  CollectiveScope scope("broadcast", comm_name(), getRank(), getSize(), tensors, static_cast<int>(opts.rootRank));
  check_in_step("broadcast", tensors, -1);
  silent_check_.before("broadcast", tensors);
  auto h = hosts(tensors);
  if (intra_host_ && h.size() == 1) {
    const at::Tensor data = h[0];
    const int root = static_cast<int>(opts.rootRank);
    return scope.attach(on_intra_host(
        "broadcast", [&](auto timeout) { intra_host_->broadcast(data, root, timeout); }, tensors, opts.timeout));
  }
  return scope.attach(named("broadcast", transport()->broadcast(h, opts), tensors));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  CollectiveScope scope("allreduce", comm_name(), getRank(), getSize(), tensors);
  check_in_step("allreduce", tensors, static_cast<int64_t>(opts.reduceOp.op_));
  silent_check_.before("allreduce", tensors);
  TORCH_CHECK(!tensors.empty(), "allreduce needs a tensor");
  const Reduction r = reduction_for(opts.reduceOp, tensors[0].scalar_type());
  for (auto& t : tensors) {
    if (r.premultiply != 1.0 || r.premultiply_tensor.defined()) {
      t.copy_(premultiplied(t, r));
    }
  }
  auto h = hosts(tensors);
  c10d::AllreduceOptions gloo_opts = opts;
  gloo_opts.reduceOp = r.gloo_op;
  const int size = getSize();
  std::function<void()> after;
  if (r.average) {
    after = [tensors, size] { divide(tensors, size); };
  }
  LinkReduce op{};
  if (intra_host_ && h.size() == 1 && link_reduce(r.gloo_op, &op)) {
    const at::Tensor data = h[0];
    return scope.attach(on_intra_host(
        "allreduce", [&](auto timeout) { intra_host_->allreduce(data, op, timeout); }, tensors, opts.timeout,
        std::move(after)));
  }
  return scope.attach(named("allreduce", transport()->allreduce(h, gloo_opts), tensors, std::move(after)));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                     const c10d::AllreduceCoalescedOptions& opts) {
  c10d::AllreduceOptions single;
  single.reduceOp = opts.reduceOp;
  single.timeout = opts.timeout;
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (auto& t : tensors) {
    std::vector<at::Tensor> one{t};
    works.push_back(allreduce(one, single));
  }
  for (auto& w : works) {
    w->wait();
  }
  return works.empty() ? barrier(c10d::BarrierOptions()) : works.back();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  CollectiveScope scope("reduce", comm_name(), getRank(), getSize(), tensors, static_cast<int>(opts.rootRank));
  check_in_step("reduce", tensors, static_cast<int64_t>(opts.reduceOp.op_));
  silent_check_.before("reduce", tensors);
  TORCH_CHECK(!tensors.empty(), "reduce needs a tensor");
  const Reduction r = reduction_for(opts.reduceOp, tensors[0].scalar_type());
  for (auto& t : tensors) {
    if (r.premultiply != 1.0 || r.premultiply_tensor.defined()) {
      t.copy_(premultiplied(t, r));
    }
  }
  auto h = hosts(tensors);
  c10d::ReduceOptions gloo_opts = opts;
  gloo_opts.reduceOp = r.gloo_op;
  const int size = getSize();
  const bool root = getRank() == static_cast<int>(opts.rootRank);
  std::function<void()> after;
  if (r.average && root) {
    after = [tensors, size] { divide(tensors, size); };
  }
  LinkReduce op{};
  if (intra_host_ && h.size() == 1 && link_reduce(r.gloo_op, &op)) {
    // Every rank reduces its share; the root keeps the result, the others keep their own tensors.
    const at::Tensor data = root ? h[0] : h[0].clone();
    return scope.attach(on_intra_host(
        "reduce", [&](auto timeout) { intra_host_->allreduce(data, op, timeout); }, tensors, opts.timeout,
        std::move(after)));
  }
  return scope.attach(named("reduce", transport()->reduce(h, gloo_opts), tensors, std::move(after)));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllgatherOptions& opts) {
  CollectiveScope scope("allgather", comm_name(), getRank(), getSize(), inputs);
  check_in_step("allgather", inputs, -1);
  silent_check_.before("allgather", inputs);
  auto ho = hosts(outputs);
  auto hi = hosts(inputs);
  if (intra_host_ && hi.size() == 1 && ho.size() == 1 && static_cast<int>(ho[0].size()) == getSize() &&
      std::all_of(ho[0].begin(), ho[0].end(), [&](const at::Tensor& o) {
        return o.numel() == hi[0].numel() && o.scalar_type() == hi[0].scalar_type();
      })) {
    // Gathered into one buffer, then copied to each output (they may be views of anything).
    const at::Tensor in_data = hi[0].contiguous();
    const std::vector<at::Tensor> outs = ho[0];
    return scope.attach(on_intra_host(
        "allgather",
        [&](auto timeout) {
          const at::Tensor gathered = at::empty({getSize() * in_data.numel()}, in_data.options());
          intra_host_->allgather(gathered, in_data, timeout);
          for (int r = 0; r < getSize(); ++r) {
            outs[r].copy_(gathered.narrow(0, r * in_data.numel(), in_data.numel()).view(outs[r].sizes()));
          }
        },
        flat(outputs), opts.timeout));
  }
  return scope.attach(named("allgather", transport()->allgather(ho, hi, opts), flat(outputs)));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::AllgatherOptions& opts) {
  CollectiveScope scope("allgather", comm_name(), getRank(), getSize(), {input});
  check_in_step("allgather_into_tensor", {input}, -1);
  silent_check_.before("allgather_into_tensor", {input});
  // gloo's allgather into world_size views of the output ([world * n] or [world, ...] alike).
  TORCH_CHECK(output.is_contiguous() && output.numel() == input.numel() * getSize(),
              "allgather_into_tensor: the output must be contiguous with world_size * ", input.numel(),
              " elements, got ", output.numel(), dist_error(kDistParam, "invalid parameter"));
  const at::Tensor out_host = host(output).reshape({-1});
  std::vector<std::vector<at::Tensor>> parts(1);
  for (int r = 0; r < getSize(); ++r) {
    parts[0].push_back(out_host.narrow(0, r * input.numel(), input.numel()).view(input.sizes()));
  }
  std::vector<at::Tensor> in_host{host(input.contiguous())};
  if (intra_host_) {
    const at::Tensor out_data = out_host;
    const at::Tensor in_data = in_host[0];
    return scope.attach(on_intra_host(
        "allgather_into_tensor", [&](auto timeout) { intra_host_->allgather(out_data, in_data, timeout); }, {output},
        opts.timeout));
  }
  return scope.attach(named("allgather_into_tensor", transport()->allgather(parts, in_host, opts), {output}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                                 std::vector<at::Tensor>& inputs,
                                                                                 const c10d::AllgatherOptions& opts) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (size_t i = 0; i < outputs.size(); ++i) {
    works.push_back(_allgather_base(outputs[i], inputs[i], opts));
  }
  for (auto& w : works) {
    w->wait();
  }
  return works.empty() ? barrier(c10d::BarrierOptions()) : works.back();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::GatherOptions& opts) {
  CollectiveScope scope("gather", comm_name(), getRank(), getSize(), inputs, static_cast<int>(opts.rootRank));
  check_in_step("gather", inputs, -1);
  silent_check_.before("gather", inputs);
  auto ho = hosts(outputs);
  auto hi = hosts(inputs);
  return scope.attach(named("gather", transport()->gather(ho, hi, opts), flat(outputs)));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::scatter(std::vector<at::Tensor>& outputs,
                                                         std::vector<std::vector<at::Tensor>>& inputs,
                                                         const c10d::ScatterOptions& opts) {
  CollectiveScope scope("scatter", comm_name(), getRank(), getSize(), outputs, static_cast<int>(opts.rootRank));
  check_in_step("scatter", outputs, -1);
  silent_check_.before("scatter", flat(inputs));
  auto ho = hosts(outputs);
  auto hi = hosts(inputs);
  return scope.attach(named("scatter", transport()->scatter(ho, hi, opts), outputs));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                                const c10d::ReduceScatterOptions& opts) {
  // The reduce-scatter of the stacked inputs.
  TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
              "reduce_scatter takes one output and world_size inputs", dist_error(kDistParam, "invalid parameter"));
  at::Tensor stacked = at::stack(inputs[0]);
  return _reduce_scatter_base(outputs[0], stacked, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                      const c10d::ReduceScatterOptions& opts) {
  CollectiveScope scope("reduce_scatter", comm_name(), getRank(), getSize(), {output});
  TORCH_CHECK(input.numel() == output.numel() * getSize(), "reduce_scatter_tensor: input has ", input.numel(),
              " elements, expected output.numel() * world_size = ", output.numel() * getSize(),
              dist_error(kDistParam, "invalid parameter"));
  check_in_step("reduce_scatter", {input}, static_cast<int64_t>(opts.reduceOp.op_));
  silent_check_.before("reduce_scatter", {input});
  const Reduction r = reduction_for(opts.reduceOp, input.scalar_type());
  // Like HCCL's, the reduce-scatter takes no device memory beyond its output: no copy of the input is reduced whole.
  const at::Tensor in = premultiplied(input.contiguous(), r);
  const at::Tensor result = output.is_contiguous() ? output : at::empty(output.sizes(), output.options());
  const at::Tensor in_host = host(in).reshape({-1});
  const at::Tensor out_host = host(result).reshape({-1});
  const int size = getSize();
  const bool average = r.average;
  at::Tensor out = output;
  std::function<void()> after = [out, in, result, average, size] {
    if (!result.is_same(out)) {
      out.copy_(result);
    }
    if (average) {
      divide({out}, size);
    }
  };
  LinkReduce op{};
  if (intra_host_ && link_reduce(r.gloo_op, &op)) {
    // In place on the ranks' inputs when the link can; otherwise the staged allreduce of a host copy.
    const int64_t rank = getRank();
    return scope.attach(on_intra_host(
        "reduce_scatter_tensor",
        [&](auto timeout) {
          if (!intra_host_->reduce_scatter(out_host, in_host, op, timeout)) {
            const at::Tensor whole = in_host.clone();
            intra_host_->allreduce(whole, op, timeout);
            out_host.copy_(whole.narrow(0, rank * out_host.numel(), out_host.numel()));
          }
        },
        {output}, opts.timeout, std::move(after)));
  }
  c10d::ReduceScatterOptions gloo_opts = opts;
  gloo_opts.reduceOp = r.gloo_op;
  at::Tensor transport_out = out_host;
  at::Tensor transport_in = in_host;
  return scope.attach(named("reduce_scatter_tensor",
                            transport()->_reduce_scatter_base(transport_out, transport_in, gloo_opts), {output},
                            std::move(after)));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (size_t i = 0; i < outputs.size(); ++i) {
    works.push_back(_reduce_scatter_base(outputs[i], inputs[i], opts));
  }
  for (auto& w : works) {
    w->wait();
  }
  return works.empty() ? barrier(c10d::BarrierOptions()) : works.back();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                               std::vector<int64_t>& output_splits,
                                                               std::vector<int64_t>& input_splits,
                                                               const c10d::AllToAllOptions& opts) {
  CollectiveScope scope("all_to_all", comm_name(), getRank(), getSize(), {input});
  check_in_step("all_to_all_single", {input}, -1);
  silent_check_.before("all_to_all_single", {input});
  check_contiguous({output, input});
  at::Tensor ho = host(output);
  at::Tensor hi = host(input);
  return scope.attach(
      named("all_to_all_single", transport()->alltoall_base(ho, hi, output_splits, input_splits, opts), {output}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& opts) {
  // Composed from alltoall_base over flattened, concatenated tensors.
  CollectiveScope scope("all_to_all", comm_name(), getRank(), getSize(), inputs);
  std::vector<at::Tensor> flat_in;
  std::vector<int64_t> in_splits, out_splits;
  for (const auto& t : inputs) {
    flat_in.push_back(t.reshape({-1}));
    in_splits.push_back(t.numel());
  }
  int64_t total = 0;
  for (const auto& t : outputs) {
    out_splits.push_back(t.numel());
    total += t.numel();
  }
  at::Tensor send = at::cat(flat_in);
  at::Tensor recv = at::empty({total}, send.options());
  std::vector<int64_t> transport_out = out_splits, transport_in = in_splits;  // the transport may consume them
  auto work = alltoall_base(recv, send, transport_out, transport_in, opts);
  std::vector<at::Tensor> outs = outputs;
  return scope.attach(c10::make_intrusive<HcclWork>(work, describe("all_to_all"), outputs, [outs, recv, out_splits] {
    int64_t offset = 0;
    for (size_t i = 0; i < outs.size(); ++i) {
      outs[i].copy_(recv.narrow(0, offset, out_splits[i]).view(outs[i].sizes()));
      offset += out_splits[i];
    }
  }));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  CollectiveScope scope("send", comm_name(), getRank(), getSize(), tensors, dst);
  silent_check_.before("send", tensors);
  auto h = hosts(tensors);
  return scope.attach(point_to_point("send", transport()->send(h, dst, tag), tensors));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  CollectiveScope scope("recv", comm_name(), getRank(), getSize(), tensors, src);
  auto h = hosts(tensors);
  return scope.attach(point_to_point("recv", transport()->recv(h, src, tag), tensors));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  CollectiveScope scope("recv", comm_name(), getRank(), getSize(), tensors);
  auto h = hosts(tensors);
  return scope.attach(point_to_point("recv", transport()->recvAnysource(h, tag), tensors));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupHCCL::barrier(const c10d::BarrierOptions& opts) {
  CollectiveScope scope("barrier", comm_name(), getRank(), getSize(), {});
  check_in_step("barrier", {}, -1);
  return scope.attach(named("barrier", transport()->barrier(opts), {}));
}

}  // namespace vnpu
