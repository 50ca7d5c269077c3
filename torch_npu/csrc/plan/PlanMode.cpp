#include "plan/PlanMode.h"

#include "aten/OpHooks.h"
#include "aten/Redirect.h"
#include "aten/RedirectCall.h"
#include "aten/TensorMapping.h"
#include "plan/PlanMemory.h"
#include "plan/PlanModules.h"
#include "plan/PlanValues.h"
#include "runtime/CachingAllocator.h"
#include "runtime/Device.h"
#include "runtime/Stream.h"

#include <ATen/Functions.h>
#include <Python.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <frameobject.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <mutex>
#include <string_view>
#include <utility>

namespace vnpu {
namespace {

constexpr c10::DispatchKeySet kMetaKeys(c10::DispatchKey::Meta);

// Unboxed operators take the boxed path in planning mode (it is the one that plans).
[[maybe_unused]] const bool g_boxed_in_plan_mode = [] {
  if (plan_mode()) {
    g_slow_path_users.fetch_add(1);
  }
  return true;
}();

// The line of the user's program that called the operator: the innermost Python frame outside torch
// and torch_npu ("" when the thread runs no Python, e.g. the autograd engine's).
std::string python_call_site() {
  if (Py_IsInitialized() == 0) {
    return "";
  }
  // Operators run with the GIL released; an error path may take it back to read this thread's frames.
  const PyGILState_STATE gil = PyGILState_Ensure();
  PyFrameObject* frame = PyEval_GetFrame();
  if (frame != nullptr) {
    Py_INCREF(frame);
  }
  std::string site;
  while (frame != nullptr && site.empty()) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    const std::string_view path = file != nullptr ? file : "";
    if (path.find("/torch/") == std::string_view::npos && path.find("/torch_npu/") == std::string_view::npos) {
      site = std::string(path) + ":" + std::to_string(PyFrame_GetLineNumber(frame));
    }
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  PyGILState_Release(gil);
  return site;
}

bool needs_values(const std::string& op, const std::string& message) {
  static constexpr std::array<std::string_view, 12> kValueOps = {"aten::_local_scalar_dense",
                                                                 "aten::nonzero",
                                                                 "aten::masked_select",
                                                                 "aten::unique_dim",
                                                                 "aten::_unique",
                                                                 "aten::_unique2",
                                                                 "aten::unique_consecutive",
                                                                 "aten::equal",
                                                                 "aten::is_nonzero",
                                                                 "aten::bincount",
                                                                 "aten::repeat_interleave",
                                                                 "aten::_assert_async"};
  for (auto name : kValueOps) {
    if (op == name) {
      return true;
    }
  }
  return message.find("data-dependent") != std::string::npos ||
         message.find("cannot be called on meta tensors") != std::string::npos;
}

// What planning mode saw: each operator with its argument shapes (calls counted).
struct Ledger {
  std::mutex mu;
  std::map<std::string, PlanLedgerRow> rows;
};
Ledger& ledger() {
  static auto* l = new Ledger();
  return *l;
}

void describe_tensors(const c10::IValue& value, std::string& shapes, std::string& dtypes) {
  auto add = [&](const at::Tensor& t) {
    if (!t.defined()) {
      return;
    }
    if (!shapes.empty() || !dtypes.empty()) {
      shapes += ";";
      dtypes += ";";
    }
    for (size_t d = 0; d < t.sizes().size(); ++d) {
      shapes += (d ? "," : "") + std::to_string(t.sizes()[d]);
    }
    std::string name = c10::toString(t.scalar_type());
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    dtypes += name;
  };
  if (value.isTensor()) {
    add(value.toTensor());
  } else if (value.isTensorList()) {
    for (const at::Tensor& t : value.toTensorList()) {
      add(t);
    }
  }
}

void record(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t nret,
            const std::vector<c10::IValue>& args) {
  PlanLedgerRow row;
  row.op = op.schema().name().substr(op.schema().name().find("::") + 2);
  for (const auto& value : args) {
    describe_tensors(value, row.input_shapes, row.input_dtypes);
  }
  for (size_t i = stack.size() - nret; i < stack.size(); ++i) {
    describe_tensors(stack[i], row.output_shapes, row.output_dtypes);
  }
  auto& l = ledger();
  std::lock_guard<std::mutex> lock(l.mu);
  const std::string key = row.op + "|" + row.input_shapes + "|" + row.input_dtypes + "|" + row.output_shapes;
  auto [it, inserted] = l.rows.emplace(key, row);
  it->second.calls += 1;
}

// Whether `cpu` is the kernel's alias of one of the call's npu tensors (not a CPU tensor of the caller).
bool plan_is_alias(const at::Tensor& cpu, const CallMapping& map) {
  return std::any_of(map.aliases.begin(), map.aliases.end(), [&](const CallMapping::Alias& a) {
    return a.cpu.unsafeGetTensorImpl() == cpu.unsafeGetTensorImpl();
  });
}

// The npu side of one planned call: meta twins of the arguments and the npu tensors they stand for.
struct PlanCall {
  struct Twin {
    at::Tensor npu;
    at::Tensor meta;
  };
  c10::SmallVector<Twin, 6> twins;
  c10::SmallVector<std::pair<c10::StorageImpl*, c10::Storage>, 6> meta_of_cpu;  // CPU alias storage -> meta
  c10::SmallVector<std::pair<c10::StorageImpl*, c10::Storage>, 2> fresh;        // result meta storage -> npu
  c10::DeviceIndex device = -1;

  c10::Storage meta_storage_for(const c10::Storage& cpu) {
    auto* key = cpu.unsafeGetStorageImpl();
    for (const auto& [impl, meta] : meta_of_cpu) {
      if (impl == key) {
        return meta;
      }
    }
    c10::Storage meta(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), cpu.nbytes(),
                                                            c10::DataPtr(nullptr, c10::Device(c10::kMeta)),
                                                            c10::GetAllocator(c10::kMeta), /*resizable=*/true));
    meta_of_cpu.emplace_back(key, meta);
    return meta;
  }

  // The meta twin of a kernel argument (a CPU alias of an npu tensor, or a CPU tensor of the call).
  at::Tensor twin(const at::Tensor& cpu, const CallMapping& map) {
    if (!cpu.defined() || cpu.device().type() != c10::kCPU) {
      return cpu;
    }
    const at::Tensor* npu = nullptr;
    for (const auto& a : map.aliases) {
      if (a.cpu.unsafeGetTensorImpl() == cpu.unsafeGetTensorImpl()) {
        npu = &*a.npu;
        break;
      }
    }
    if (npu == nullptr && cpu.dim() == 0) {
      return cpu;  // a CPU scalar: kernels of every device take it
    }
    auto meta = at::detail::make_tensor<c10::TensorImpl>(meta_storage_for(cpu.storage()), kMetaKeys, cpu.dtype());
    copy_geometry(cpu, meta);
    if (npu != nullptr) {
      twins.push_back({*npu, meta});
    }
    return meta;
  }

  c10::IValue twin_value(const c10::IValue& value, const CallMapping& map) {
    if (value.isTensor()) {
      return twin(value.toTensor(), map);
    }
    if (value.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const at::Tensor& t : value.toTensorList()) {
        out.push_back(twin(t, map));
      }
      return out;
    }
    if (value.isList() && value.toListRef().size() > 0 && value.toListRef()[0].isTensor()) {
      c10::List<std::optional<at::Tensor>> out;
      for (const c10::IValue& element : value.toListRef()) {
        out.push_back(element.isTensor() ? std::optional<at::Tensor>(twin(element.toTensor(), map)) : std::nullopt);
      }
      return out;
    }
    if (value.isDevice() && value.toDevice().is_cpu() && !map.keep_cpu) {
      return c10::Device(c10::kMeta);
    }
    return value;
  }

  // An npu storage of `nbytes` from the caching allocator of the call's device.
  c10::Storage npu_storage(size_t nbytes) const {
    c10::DeviceGuard guard(c10::Device(kNpu, device));
    return c10::Storage(c10::Storage::use_byte_size_t(), nbytes, npu_allocator(), /*resizable=*/true);
  }

  at::Tensor to_npu(const at::Tensor& meta, bool keep_cpu) {
    if (!meta.defined() || meta.device().type() != c10::kMeta) {
      return meta;
    }
    for (const auto& t : twins) {
      if (t.meta.unsafeGetTensorImpl() == meta.unsafeGetTensorImpl()) {
        return t.npu;  // returned an argument (in-place and out= operators)
      }
    }
    if (keep_cpu) {
      return at::empty_strided(meta.sizes(), meta.strides(), meta.options().device(c10::kCPU));
    }
    auto* storage = meta.storage().unsafeGetStorageImpl();
    for (const auto& t : twins) {
      if (t.meta.storage().unsafeGetStorageImpl() == storage) {
        return npu_view(t.npu, meta);  // a view of an argument
      }
    }
    for (const auto& [impl, npu] : fresh) {
      if (impl == storage) {
        return npu_tensor_over(npu, meta);  // another view of a fresh result
      }
    }
    c10::Storage npu = npu_storage(meta.storage().nbytes());
    fresh.emplace_back(storage, npu);
    return npu_tensor_over(npu, meta);
  }

  // In-place and out= arguments take the sizes the kernel gave them; growth gets npu memory.
  void reflect_writes() {
    for (auto& t : twins) {
      auto* npu_impl = t.npu.unsafeGetTensorImpl();
      auto* meta_impl = t.meta.unsafeGetTensorImpl();
      const size_t needed = t.meta.storage().nbytes();
      if (needed > t.npu.storage().nbytes()) {
        auto* npu_storage = t.npu.storage().unsafeGetStorageImpl();
        c10::DeviceGuard guard(t.npu.device());
        npu_storage->set_data_ptr_noswap(npu_allocator()->allocate(needed));
        npu_storage->set_nbytes(needed);
      }
      if (meta_impl->sizes() != npu_impl->sizes() || meta_impl->strides() != npu_impl->strides() ||
          meta_impl->storage_offset() != npu_impl->storage_offset()) {
        npu_impl->set_sizes_and_strides(meta_impl->sizes(), meta_impl->strides(), meta_impl->storage_offset());
      }
    }
  }
};

// In-place operators that overwrite what they write without reading it.
bool overwrites(const std::string& name) {
  static constexpr std::array<std::string_view, 10> kOverwriting = {
      "aten::fill_",      "aten::zero_",        "aten::normal_",    "aten::uniform_",    "aten::random_",
      "aten::bernoulli_", "aten::exponential_", "aten::geometric_", "aten::log_normal_", "aten::cauchy_"};
  return std::find(kOverwriting.begin(), kOverwriting.end(), name) != kOverwriting.end();
}

// Whether every npu tensor the operator reads holds values (plan/PlanValues.h), so that it can compute
// values too; operators with out= arguments never do.
bool reads_only_values(const c10::OperatorHandle& op, const OpFacts& facts, const torch::jit::Stack& stack,
                       size_t base) {
  const auto& args = op.schema().arguments();
  const bool overwriting = overwrites(op.schema().name());
  bool valued = true;
  const auto check = [&](const at::Tensor& t) {
    valued = valued && (!t.defined() || t.device().type() != kNpu || plan_has_values(t));
  };
  for (size_t i = 0; i < facts.num_args && valued; ++i) {
    if (args[i].is_out()) {
      return false;
    }
    if (facts.written[i] && overwriting) {
      continue;
    }
    const c10::IValue& value = stack[base + i];
    if (value.isTensor()) {
      check(value.toTensor());
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorList()) {
        check(t);
      }
    } else if (value.isList()) {
      for (const c10::IValue& element : value.toListRef()) {
        if (element.isTensor()) {
          check(element.toTensor());
        }
      }
    }
  }
  return valued;
}

bool shares_storage(const at::Tensor& t, const std::vector<c10::IValue>& args) {
  return std::any_of(args.begin(), args.end(), [&](const c10::IValue& a) {
    return a.isTensor() && a.toTensor().defined() && a.toTensor().has_storage() &&
           a.toTensor().storage().is_alias_of(t.storage());
  });
}

// Computes, on the CPU, an operator whose inputs all hold values and whose npu results are small: the
// planned results (already allocated as in any planned call) receive the values. False if a result is
// too large to hold values (then nothing is computed).
bool compute_small_values(const c10::OperatorHandle& op, const OpFacts& facts, const std::vector<c10::IValue>& args,
                          torch::jit::Stack* stack) {
  const size_t nret = facts.num_returns;
  std::vector<at::Tensor> results;
  for (size_t r = stack->size() - nret; r < stack->size(); ++r) {
    const c10::IValue& value = (*stack)[r];
    if (value.isTensor()) {
      results.push_back(value.toTensor());
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorList()) {
        results.push_back(t);
      }
    }
  }
  for (const at::Tensor& t : results) {
    if (t.defined() && t.device().type() == kNpu && !plan_can_hold_values(t) && !shares_storage(t, args)) {
      return false;
    }
  }
  for (size_t i = 0; i < facts.num_args; ++i) {
    if (facts.written[i] && args[i].isTensor() && !plan_can_hold_values(args[i].toTensor())) {
      return false;
    }
  }
  torch::jit::Stack real(args.begin(), args.end());
  RedirectCall call(facts);
  map_redirect_arguments(call, facts, &real, 0);
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &real);
  std::vector<at::Tensor> computed;
  for (const c10::IValue& value : real) {
    if (value.isTensor()) {
      computed.push_back(value.toTensor());
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorList()) {
        computed.push_back(t);
      }
    }
  }
  for (size_t k = 0; k < results.size() && k < computed.size(); ++k) {
    const at::Tensor& planned = results[k];
    if (!planned.defined() || planned.device().type() != kNpu) {
      continue;
    }
    if (!shares_storage(planned, args)) {  // a fresh result: the values land in its npu memory
      make_cpu_alias(planned, false).copy_(computed[k]);
    }
    plan_values_written(planned);
  }
  for (size_t i = 0; i < facts.num_args; ++i) {
    if (facts.written[i] && args[i].isTensor()) {
      plan_values_written(args[i].toTensor());  // the CPU kernel wrote through its alias
    }
  }
  return true;
}

}  // namespace

PlanFactoryScope::PlanFactoryScope(const char* op) {
  if (C10_LIKELY(!plan_mode()) || plan_label().op != nullptr) {
    return;
  }
  active_ = true;
  plan_label().op = op;
  generation_ = plan_peak_generation();
}

PlanFactoryScope::~PlanFactoryScope() {
  if (!active_) {
    return;
  }
  plan_label().op = nullptr;
  if (plan_peak_generation() != generation_) {
    set_plan_peak_site(generation_, python_call_site());
  }
}

at::Tensor plan_copy(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  const auto host = [](const at::Tensor& t) { return t.device().type() == kNpu ? make_cpu_alias(t, false) : t; };
  const bool from_values = self.device().type() != kNpu || plan_has_values(self);
  if (dst.device().type() != kNpu) {
    if (!from_values) {
      plan_needs_values("copying an npu tensor to the " + dst.device().str() + " (.cpu(), .numpy(), printing)");
    }
    dst.copy_(host(self), non_blocking);
    return dst;
  }
  if (from_values && plan_can_hold_values(dst)) {
    host(dst).copy_(host(self), non_blocking);
    plan_values_written(dst);
    return dst;
  }
  const auto meta = [](const at::Tensor& t) {
    return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
  };
  meta(dst).copy_(meta(self), non_blocking);  // the copy's own checks (shapes, dtypes)
  plan_values_lost(dst);                      // nothing to move: npu memory holds no values
  return dst;
}

void plan_needs_values(const std::string& what) {
  const std::string site = python_call_site();
  TORCH_CHECK(false, "vnpu plan mode computes no values, but ", what, " needs them",
              site.empty() ? std::string() : " (at " + site + ")",
              ". Planning mode (VNPU_PLAN=1) runs shapes, dtypes and memory only: keep value-dependent code "
              "(.item(), printing, .cpu(), data-dependent control flow) out of a planned step.");
}

void run_plan(const OpFacts& facts, const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (op.schema().name() == "aten::copy_" && op.schema().overload_name().empty()) {
    // copy_(self, src, non_blocking) of values planning mode keeps: small host data, there and back.
    const size_t first = stack->size() - 3;
    at::Tensor dst = (*stack)[first].toTensor();
    const at::Tensor& src = (*stack)[first + 1].toTensor();
    if ((src.device().type() != kNpu || plan_has_values(src)) &&
        (dst.device().type() != kNpu || plan_can_hold_values(dst))) {
      plan_copy(src, dst, (*stack)[first + 2].toBool());
      torch::jit::drop(*stack, 3);
      stack->emplace_back(std::move(dst));
      return;
    }
  }
  PlanLabelScope label(op.schema().name().c_str(), plan_current_module());
  const uint64_t generation = plan_peak_generation();
  RedirectCall call(facts);
  const size_t base = stack->size() - facts.num_args;
  const bool observed = slow_path_active();
  const std::vector<c10::IValue> inputs = observe_arguments(op, facts, *stack, base, observed);
  // An operator that reads only values and makes small results computes them (plan/PlanValues.h).
  std::vector<c10::IValue> valued_args;
  if (reads_only_values(op, facts, *stack, base)) {
    valued_args.assign(stack->begin() + static_cast<std::ptrdiff_t>(base), stack->end());
  }
  for (size_t i = 0; i < facts.num_args && facts.writes_arguments; ++i) {
    const auto& value = (*stack)[base + i];
    if (facts.written[i] && value.isTensor() && value.toTensor().device().type() == kNpu) {
      plan_values_lost(value.toTensor());  // a planned operator computes no values into what it writes
    }
  }
  map_redirect_arguments(call, facts, stack, base);
  // Reading values back to the host (.item(), .cpu() of small data that holds values) runs for real.
  if (!valued_args.empty() && (call.map.keep_cpu || op.schema().name() == "aten::_local_scalar_dense")) {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
    return;
  }
  for (size_t i = 0; i < facts.num_args && facts.writes_arguments; ++i) {
    const auto& value = (*stack)[base + i];
    if (facts.written[i] && value.isTensor() && value.toTensor().defined() &&
        value.toTensor().device().type() == c10::kCPU && !plan_is_alias(value.toTensor(), call.map)) {
      plan_needs_values("writing into a cpu tensor (" + std::string(op.schema().name()) + ")");
    }
  }
  PlanCall plan;
  plan.device = call.map.device >= 0 ? call.map.device : current_device();
  for (size_t i = base; i < stack->size(); ++i) {
    (*stack)[i] = plan.twin_value((*stack)[i], call.map);
  }
  for (int g : facts.generator_args) {
    (*stack)[base + static_cast<size_t>(g)] = c10::IValue();  // nothing is drawn
  }
  const std::vector<c10::IValue> meta_args(stack->begin() + static_cast<std::ptrdiff_t>(base), stack->end());
  const int64_t start_ns = observed ? now_ns() : 0;
  try {
    op.redispatchBoxed(kMetaKeys, stack);
  } catch (const c10::Error& error) {
    const std::string name = op.schema().name();
    const std::string message = error.what_without_backtrace();
    if (call.map.keep_cpu && message.find("Cannot copy out of meta tensor") != std::string::npos) {
      plan_needs_values("copying an npu tensor to the cpu (.cpu(), .numpy(), printing)");
    }
    if (needs_values(name, message)) {
      plan_needs_values(name);
    }
    if (message.find("Could not run") != std::string::npos ||
        message.find("no fake impl or Meta kernel") != std::string::npos) {
      const std::string site = python_call_site();
      TORCH_CHECK_NOT_IMPLEMENTED(false, "vnpu plan mode: ", name,
                                  " has no shape function (Meta kernel), so planning mode cannot run it",
                                  site.empty() ? std::string() : " (at " + site + ")");
    }
    throw;
  } catch (const std::exception& error) {  // a Meta kernel written in Python raised
    if (needs_values(op.schema().name(), error.what())) {
      plan_needs_values(op.schema().name());
    }
    throw;
  }
  const int64_t end_ns = observed ? now_ns() : 0;
  plan.reflect_writes();
  const size_t nret = facts.num_returns;
  for (size_t r = stack->size() - nret; r < stack->size(); ++r) {
    auto& value = (*stack)[r];
    if (value.isTensor()) {
      value = plan.to_npu(value.toTensor(), call.map.keep_cpu);
    } else if (value.isTensorList()) {
      c10::List<at::Tensor> mapped;
      for (const at::Tensor& t : value.toTensorList()) {
        mapped.push_back(plan.to_npu(t, call.map.keep_cpu));
      }
      value = std::move(mapped);
    }
  }
  if (!valued_args.empty()) {
    compute_small_values(op, facts, valued_args, stack);
  }
  record(op, *stack, nret, meta_args);
  if (plan_peak_generation() != generation) {  // this call made a new peak: name the program line
    set_plan_peak_site(generation, python_call_site());
  }
  if (C10_UNLIKELY(observed)) {
    std::vector<c10::IValue> outputs(stack->end() - static_cast<std::ptrdiff_t>(nret), stack->end());
    run_hooks_after(OpCall{op, facts, plan.device, inputs, outputs, start_ns, end_ns});
  }
}

std::vector<PlanLedgerRow> plan_ledger() {
  auto& l = ledger();
  std::lock_guard<std::mutex> lock(l.mu);
  std::vector<PlanLedgerRow> rows;
  rows.reserve(l.rows.size());
  for (const auto& [key, row] : l.rows) {
    rows.push_back(row);
  }
  return rows;
}

}  // namespace vnpu
