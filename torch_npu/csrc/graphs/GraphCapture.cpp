#include "graphs/GraphCapture.h"

#include "aten/DispatchKeys.h"
#include "graphs/CaptureStreams.h"

#include "aten/HostSync.h"
#include "aten/Redirect.h"
#include "aten/TensorMapping.h"
#include "runtime/CachingAllocator.h"
#include "runtime/Device.h"
#include "runtime/Stream.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <mutex>
#include <sstream>
#include <unordered_map>

namespace vnpu {
namespace {

thread_local bool tl_replaying = false;

struct ActiveCaptures {
  std::mutex mu;
  std::vector<std::weak_ptr<GraphRecording>> graphs;
};
ActiveCaptures& active() {
  static auto* a = new ActiveCaptures();
  return *a;
}

[[noreturn]] void not_permitted(const OpFacts& facts, const std::string& why) {
  TORCH_CHECK(false, "operation not permitted when stream is capturing: ", facts.name, " ", why,
              " (a synchronisation). Run it outside torch.npu.graph(...): NPU graph capture records device "
              "work only.");
}

// Writes a replayed result into the captured output's memory.
void copy_into(const at::Tensor& captured, const at::Tensor& fresh) {
  if (!captured.defined() || !fresh.defined() || captured.unsafeGetTensorImpl() == fresh.unsafeGetTensorImpl()) {
    return;
  }
  TORCH_CHECK(captured.sizes() == fresh.sizes(), "NPU graph replay produced a result of shape ", fresh.sizes(),
              " where the captured one had ", captured.sizes(),
              ": operators with data-dependent shapes cannot be captured");
  if (captured.is_same(fresh) || (captured.data_ptr() == fresh.data_ptr() && captured.strides() == fresh.strides())) {
    return;  // a view of the same memory
  }
  auto dst = captured.device().type() == kNpu ? make_cpu_alias(captured, false) : captured;
  auto src = fresh.device().type() == kNpu ? make_cpu_alias(fresh, false) : fresh;
  dst.copy_(src);
}

void copy_into(const c10::IValue& captured, const c10::IValue& fresh) {
  if (captured.isTensor() && fresh.isTensor()) {
    copy_into(captured.toTensor(), fresh.toTensor());
  } else if (captured.isTensorList() && fresh.isTensorList()) {
    auto a = captured.toTensorList();
    auto b = fresh.toTensorList();
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      copy_into(static_cast<at::Tensor>(a.get(i)), static_cast<at::Tensor>(b.get(i)));
    }
  }
}

std::string describe_value(const c10::IValue& v) {
  std::ostringstream os;
  if (v.isTensor()) {
    const auto& t = v.toTensor();
    if (t.defined()) {
      os << t.scalar_type() << t.sizes();
    } else {
      os << "None";
    }
  } else if (v.isTensorList()) {
    os << "[" << v.toTensorList().size() << " tensors]";
  } else {
    os << v;
  }
  return os.str();
}

}  // namespace

void GraphRecording::begin(c10::Stream stream) {
  TORCH_CHECK(!capturing_, "This NPUGraph is already capturing");
  records_.clear();
  capturing_ = true;
  stream_ = stream;
  thread_ = std::this_thread::get_id();
  capture_streams::begin(stream_native_handle(stream_));
  {
    auto& a = active();
    std::lock_guard<std::mutex> guard(a.mu);
    a.graphs.push_back(weak_from_this());
  }
  add_op_hook(shared_from_this());
}

namespace {

// A tensor over the same memory whose storage owns nothing (no deleter, not resizable): what the graph keeps of
// a tensor in its pool. Tensors over one storage get one such storage; a tensor met again gets the same alias.
struct PoolAliases {
  std::unordered_map<c10::StorageImpl*, c10::Storage> storages;
  std::unordered_map<c10::TensorImpl*, at::Tensor> tensors;

  at::Tensor of(const at::Tensor& t) {
    auto& alias = tensors[t.unsafeGetTensorImpl()];
    if (alias.defined()) {
      return alias;
    }
    c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
    auto& owned = storages[storage];
    if (!owned) {
      void* data = const_cast<void*>(storage->data_ptr().get());
      owned = c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), storage->nbytes(),
                                                                 c10::DataPtr(data, storage->device()), nullptr,
                                                                 /*resizable=*/false));
    }
    alias = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(owned), kNpuKeys, t.dtype());
    alias.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
    return alias;
  }
};

void alias_pool_tensors(c10::IValue& value, uint64_t pool, PoolAliases& aliases) {
  if (value.isTensor()) {
    const at::Tensor& t = value.toTensor();
    if (t.defined() && t.device().type() == kNpu && t.has_storage() && t.layout() == c10::kStrided &&
        pool_of_memory(t.device().index(), t.storage().data_ptr().get()) == pool) {
      value = aliases.of(t);
    }
  } else if (value.isTensorList()) {
    auto list = value.toTensorList();
    for (size_t i = 0; i < list.size(); ++i) {
      c10::IValue item(list.get(i));
      alias_pool_tensors(item, pool, aliases);
      list.set(i, item.toTensor());
    }
  }
}

}  // namespace

// When a capture ends, the graph refers to the memory of its pool by address, as a CUDA graph does, instead
// of holding its tensors: what only the graph used (its intermediates) goes back to the pool, which captures
// and warm-ups sharing it may reuse (they replay in order); the graph's outputs and their memory belong to
// whoever holds them (memory_allocated counts what is alive; a graph tree frees, checkpoints and guards
// them). Tensors from elsewhere (parameters, inputs) stay held: replays read them.
void GraphRecording::refer_to_pool_by_address() {
  const c10::DeviceIndex device = stream_.device_index();
  const uint64_t pool = thread_mem_pool(device);
  if (pool == 0) {
    return;
  }
  PoolAliases aliases;
  for (auto& record : records_) {
    for (auto* values : {&record.inputs, &record.outputs}) {
      for (c10::IValue& value : *values) {
        alias_pool_tensors(value, pool, aliases);
      }
    }
  }
}

void GraphRecording::end() {
  TORCH_CHECK(capturing_, "capture_end() called without capture_begin()");
  capturing_ = false;
  refer_to_pool_by_address();
  capture_streams::end(stream_native_handle(stream_));
  remove_op_hook(shared_from_this());
  auto& a = active();
  std::lock_guard<std::mutex> guard(a.mu);
  a.graphs.erase(std::remove_if(a.graphs.begin(), a.graphs.end(),
                                [this](const std::weak_ptr<GraphRecording>& g) {
                                  auto p = g.lock();
                                  return !p || p.get() == this;
                                }),
                 a.graphs.end());
}

bool GraphRecording::captures_current_stream() const {
  if (!capturing_ || std::this_thread::get_id() != thread_) {
    return false;
  }
  const c10::Stream current = current_stream(stream_.device_index());
  return current.id() == stream_.id() ||
         capture_streams::joined(stream_native_handle(stream_), stream_native_handle(current));
}

bool GraphRecording::records_here() const {
  return !tl_replaying && captures_current_stream();
}

void GraphRecording::before(const c10::OperatorHandle& op, const OpFacts& facts,
                            const std::vector<c10::IValue>& inputs) {
  if (!records_here()) {
    return;
  }
  const std::string why = host_sync_reason(op, inputs);
  if (!why.empty()) {
    not_permitted(facts, why);
  }
}

namespace {

// The operator's out= overload when it takes exactly the functional arguments followed by one out
// argument per (tensor) result: replaying it writes straight into the captured results.
std::optional<c10::OperatorHandle> out_overload(const c10::OperatorHandle& op) {
  const auto& schema = op.schema();
  if (schema.overload_name() == "out" || schema.returns().empty() || schema.is_mutable()) {
    return std::nullopt;
  }
  auto out = c10::Dispatcher::singleton().findOp({schema.name(), "out"});
  if (!out.has_value()) {
    return std::nullopt;
  }
  const auto& out_schema = out->schema();
  const size_t n = schema.arguments().size();
  if (out_schema.arguments().size() != n + schema.returns().size()) {
    return std::nullopt;
  }
  for (size_t i = 0; i < n; ++i) {
    if (out_schema.arguments()[i].name() != schema.arguments()[i].name()) {
      return std::nullopt;
    }
  }
  for (size_t i = n; i < out_schema.arguments().size(); ++i) {
    if (!out_schema.arguments()[i].is_out()) {
      return std::nullopt;
    }
  }
  return out;
}

// The captured npu tensors still have the memory and shape their prepared CPU aliases see (a module
// moved away and back gets new memory; replay then maps the arguments again).
bool still_in_place(const std::vector<c10::IValue>& inputs, const std::vector<c10::IValue>& cpu_stack) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].isTensor()) {
      continue;
    }
    const auto& npu = inputs[i].toTensor();
    if (!npu.defined() || npu.device().type() != kNpu) {
      continue;
    }
    const auto& cpu = cpu_stack[i].toTensor();
    if (npu.data_ptr() != cpu.data_ptr() || npu.sizes() != cpu.sizes() || npu.strides() != cpu.strides()) {
      return false;
    }
  }
  return true;
}

bool plain_tensors(const std::vector<c10::IValue>& values) {
  return std::all_of(values.begin(), values.end(), [](const c10::IValue& v) {
    return v.isTensor() && v.toTensor().defined() && v.toTensor().is_contiguous();
  });
}

}  // namespace

void GraphRecording::after(const OpCall& call) {
  if (!records_here()) {
    return;
  }
  Record record{call.op, &call.facts, &call.facts, call.inputs, call.outputs, {}, {}, {}, call.device};
  if (plain_tensors(call.outputs)) {
    if (auto out = out_overload(call.op)) {
      record.op = *out;
      record.facts = &op_facts_of(out->schema());
      record.inputs.insert(record.inputs.end(), call.outputs.begin(), call.outputs.end());
    }
  }
  prepare_direct_replay(record);
  records_.push_back(std::move(record));
}

void GraphRecording::prepare_direct_replay(Record& record) {
  if (!record.facts->generator_args.empty() || record.facts->layout_arg >= 0) {
    return;
  }
  std::vector<c10::IValue> stack;
  stack.reserve(record.inputs.size());
  for (const auto& value : record.inputs) {
    if (value.isTensor()) {
      const auto& t = value.toTensor();
      if (t.defined() && t.device().type() == kNpu) {
        if (t.layout() != c10::kStrided || t._is_zerotensor()) {
          return;
        }
        stack.emplace_back(make_cpu_alias(t, /*owning=*/false));  // record.inputs keeps the npu tensor
      } else {
        stack.push_back(value);
      }
    } else if (value.isTensorList() || value.isDevice() ||
               (value.isList() && !value.isIntList() && !value.isDoubleList() && !value.isBoolList())) {
      return;  // the redirect maps these (lists that may hold tensors, devices)
    } else {
      stack.push_back(value);
    }
  }
  record.cpu_stack = std::move(stack);
}

void GraphRecording::replay() {
  TORCH_CHECK(!capturing_, "NPUGraph.replay() called while the graph is still capturing");
  const bool previous = tl_replaying;
  tl_replaying = true;
  try {
    for (const auto& record : records_) {
      if (record.host_kernel) {
        record.host_kernel(record.inputs, record.outputs);
        continue;
      }
      if (!record.cpu_stack.empty() && still_in_place(record.inputs, record.cpu_stack)) {
        torch::jit::Stack stack(record.cpu_stack.begin(), record.cpu_stack.end());
        {
          DevicePoolScope pools(record.device);
          record.op->redispatchBoxed(kCpuKeys, &stack);
        }
        for (size_t i = 0; i < std::min(stack.size(), record.outputs.size()); ++i) {
          copy_into(record.outputs[i], stack[i]);
        }
        continue;
      }
      torch::jit::Stack stack(record.inputs.begin(), record.inputs.end());
      run_redirect(*record.facts, *record.op, &stack);
      for (size_t i = 0; i < std::min(stack.size(), record.outputs.size()); ++i) {
        copy_into(record.outputs[i], stack[i]);
      }
    }
  } catch (...) {
    tl_replaying = previous;
    throw;
  }
  tl_replaying = previous;
}

void GraphRecording::reset() {
  if (capturing_) {
    end();
  }
  records_.clear();
}

std::vector<std::string> GraphRecording::describe() const {
  std::vector<std::string> lines;
  for (size_t i = 0; i < records_.size(); ++i) {
    std::ostringstream os;
    os << i << " " << name_of(records_[i]) << "(";
    const auto& args = records_[i].inputs;
    const size_t shown = records_[i].issued != nullptr ? records_[i].issued->arg_names.size() : 0;
    for (size_t a = 0; a < shown && a < args.size(); ++a) {
      os << (a ? ", " : "") << records_[i].facts->arg_names[a] << "=" << describe_value(args[a]);
    }
    os << ")";
    lines.push_back(os.str());
  }
  return lines;
}

std::vector<size_t> GraphRecording::records_of(const std::string& op_name) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < records_.size(); ++i) {
    if (name_of(records_[i]) == op_name ||
        (records_[i].issued != nullptr && records_[i].op && records_[i].op->schema().name() == op_name)) {
      out.push_back(i);
    }
  }
  return out;
}

void GraphRecording::update_argument(size_t record, const std::string& name, const c10::IValue& value) {
  TORCH_CHECK(record < records_.size(), "NPUGraph.update: operator ", record, " was not captured");
  auto& r = records_[record];
  TORCH_CHECK(r.facts != nullptr, "NPUGraph.update: captured task ", record, " is a host kernel (", r.host_name,
              "), which has no arguments to update");
  for (size_t i = 0; i < r.facts->arg_names.size(); ++i) {
    if (r.facts->arg_names[i] == name) {
      r.inputs[i] = value;
      if (i < r.cpu_stack.size()) {
        r.cpu_stack[i] = value;
      }
      return;
    }
  }
  TORCH_CHECK(false, "NPUGraph.update: ", r.facts->name, " has no argument named '", name, "'");
}

void GraphRecording::splice(size_t start, size_t end, const GraphRecording& replacement) {
  TORCH_CHECK(start <= end && end <= records_.size(), "graph task update: tasks [", start, ", ", end,
              ") are not in this graph (", records_.size(), " captured)");
  TORCH_CHECK(end - start == replacement.records_.size(), "graph task update: the group captured ", end - start,
              " operators but the update issued ", replacement.records_.size());
  std::copy(replacement.records_.begin(), replacement.records_.end(),
            records_.begin() + static_cast<std::ptrdiff_t>(start));
}

void GraphRecording::replace(size_t start, size_t end, const GraphRecording& replacement) {
  TORCH_CHECK(start <= end && end <= records_.size(), "graph update: tasks [", start, ", ", end,
              ") are not in this graph (", records_.size(), " captured)");
  records_.erase(records_.begin() + static_cast<std::ptrdiff_t>(start),
                 records_.begin() + static_cast<std::ptrdiff_t>(end));
  records_.insert(records_.begin() + static_cast<std::ptrdiff_t>(start), replacement.records_.begin(),
                  replacement.records_.end());
}

bool GraphRecording::add_host_kernel(const std::string& name, HostKernel kernel, std::vector<c10::IValue> reads,
                                     std::vector<c10::IValue> writes) {
  if (!records_here()) {
    return false;
  }
  Record record;
  record.host_name = name;
  record.host_kernel = std::move(kernel);
  record.inputs = std::move(reads);
  record.outputs = std::move(writes);
  records_.push_back(std::move(record));
  return true;
}

bool record_host_kernel(const std::string& name, const HostKernel& kernel, const std::vector<c10::IValue>& reads,
                        const std::vector<c10::IValue>& writes) {
  std::vector<std::shared_ptr<GraphRecording>> graphs;
  {
    auto& a = active();
    std::lock_guard<std::mutex> guard(a.mu);
    for (const auto& weak : a.graphs) {
      if (auto g = weak.lock()) {
        graphs.push_back(std::move(g));
      }
    }
  }
  for (const auto& g : graphs) {
    if (g->add_host_kernel(name, kernel, reads, writes)) {
      return true;
    }
  }
  return false;
}

bool current_stream_capturing() {
  auto& a = active();
  std::lock_guard<std::mutex> guard(a.mu);
  for (const auto& weak : a.graphs) {
    auto g = weak.lock();
    if (g && g->captures_current_stream()) {
      return true;
    }
  }
  return false;
}

}  // namespace vnpu
