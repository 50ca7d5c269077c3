#include "aten/Redirect.h"
#include "aten/DispatchKeys.h"

#include "aten/CpuFallback.h"
#include "aten/HostSync.h"
#include "aten/OpFacts.h"
#include "aten/OpHooks.h"
#include "aten/RedirectCall.h"
#include "plan/PlanMode.h"
#include "precision/PrecisionEmulation.h"
#include "precision/StrongConsistency.h"
#include "runtime/CachingAllocator.h"
#include "runtime/Device.h"
#include "runtime/Stream.h"

#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <iterator>
#include <memory>

namespace vnpu {

void map_redirect_arguments(RedirectCall& call, const OpFacts& facts, torch::jit::Stack* stack, size_t base) {
  const size_t nargs = facts.num_args;
  // Arguments: npu tensors become CPU aliases, devices are checked, device= is rewritten.
  for (size_t i = 0; i < nargs; ++i) {
    auto& value = (*stack)[base + i];
    const auto arg = static_cast<int>(i);
    if (value.isTensor()) {
      value = call.tensor(value.toTensor(), arg);
    } else if (value.isTensorList()) {
      auto list = value.toTensorList();
      c10::List<at::Tensor> cpu;
      cpu.reserve(list.size());
      for (const at::Tensor& t : list) {
        cpu.push_back(call.tensor(t, arg));
      }
      value = std::move(cpu);
    } else if (facts.optional_tensor_list[i] && value.isList()) {
      c10::List<std::optional<at::Tensor>> cpu;
      for (const c10::IValue& element : value.toListRef()) {
        cpu.push_back(element.isTensor() ? std::optional<at::Tensor>(call.tensor(element.toTensor(), arg))
                                         : std::nullopt);
      }
      value = std::move(cpu);
    } else if (value.isDevice()) {
      value = c10::IValue(call.device(value.toDevice()));
    } else if (C10_UNLIKELY(arg == facts.layout_arg && value.isInt())) {
      call.layout(static_cast<c10::Layout>(value.toInt()));
    }
  }
  call.settle();
  for (int g : facts.generator_args) {
    auto& value = (*stack)[base + static_cast<size_t>(g)];
    auto routed = call.generator(value.isNone() ? std::nullopt : std::optional<at::Generator>(value.toGenerator()));
    value = routed.has_value() ? c10::IValue(*routed) : c10::IValue();
  }
}

std::vector<c10::IValue> observe_arguments(const c10::OperatorHandle& op, const OpFacts& facts,
                                           const torch::jit::Stack& stack, size_t base, bool observed) {
  std::vector<c10::IValue> inputs;
  if (C10_UNLIKELY(observed)) {
    inputs.assign(stack.begin() + static_cast<std::ptrdiff_t>(base), stack.end());
    run_hooks_before(op, facts, inputs);
  }
  return inputs;
}

void run_redirect(const OpFacts& facts, const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (C10_UNLIKELY(plan_mode())) {
    run_plan(facts, op, stack);
    return;
  }
  if (C10_UNLIKELY(facts.cpu_fallback)) {
    report_cpu_fallback(facts);
  }
  RedirectCall call(facts);
  const size_t base = stack->size() - facts.num_args;
  const bool observed = slow_path_active();
  const std::vector<c10::IValue> inputs = observe_arguments(op, facts, *stack, base, observed);
  map_redirect_arguments(call, facts, stack, base);

  // 2. Run the CPU kernel. What it allocates comes from the npu pools of the target device.
  const int64_t start_ns = observed ? now_ns() : 0;
  try {
    if (call.map.keep_cpu) {
      op.redispatchBoxed(kCpuKeys, stack);
    } else {
      DevicePoolScope scope(call.map.device);
      if (C10_UNLIKELY(observed) && facts.cube_class != CubeClass::None) {
        const CubeRounding rounding = cube_rounding(facts);
        for (int arg : facts.cube_args) {
          auto& value = (*stack)[base + static_cast<size_t>(arg)];
          if (value.isTensor()) {
            value = round_for_cube(value.toTensor(), rounding);
          }
        }
      }
      const bool in_row_blocks = C10_UNLIKELY(observed) && facts.cube_class == CubeClass::Matmul &&
                                 strong_consistency() && run_in_row_blocks(op, stack, base);
      if (!in_row_blocks) {
        op.redispatchBoxed(kCpuKeys, stack);
      }
    }
  } catch (const c10::NotImplementedError& error) {
    call.rethrow_for_npu(error);
  } catch (const c10::Error& error) {
    call.rethrow_for_npu(error);
  }
  const int64_t end_ns = observed ? now_ns() : 0;
  if (C10_UNLIKELY(facts.reads_device_memory_on_host) && call.map.device >= 0) {
    host_waits_for_stream(call.map.device);
  }

  // 3. Reflect what the kernel did to written arguments, then map the results.
  call.reflect_writes();
  const size_t nret = facts.num_returns;
  for (size_t r = stack->size() - nret; r < stack->size(); ++r) {
    auto& value = (*stack)[r];
    if (value.isTensor()) {
      value = call.map.to_npu(value.toTensor());
    } else if (value.isTensorList()) {
      auto list = value.toTensorList();
      c10::List<at::Tensor> mapped;
      mapped.reserve(list.size());
      for (const at::Tensor& t : list) {
        mapped.push_back(call.map.to_npu(t));
      }
      value = std::move(mapped);
    }
  }
  if (C10_UNLIKELY(observed)) {
    std::vector<c10::IValue> outputs(stack->end() - static_cast<std::ptrdiff_t>(nret), stack->end());
    run_hooks_after(OpCall{op, facts, call.map.device, inputs, outputs, start_ns, end_ns});
  }
}

namespace {

struct RedirectKernel final : c10::OperatorKernel {
  explicit RedirectKernel(const c10::FunctionSchema& schema) : facts(make_op_facts(schema)) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet /*ks*/, torch::jit::Stack* stack) {
    run_redirect(facts, op, stack);
  }
  OpFacts facts;
};

}  // namespace

void redirect_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet /*ks*/, torch::jit::Stack* stack) {
  run_redirect(op_facts_of(op.schema()), op, stack);
}

int64_t register_redirects(const std::vector<std::string>& names) {
  static auto* library =
      new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  int64_t count = 0;
  for (const auto& name : names) {
    const auto dot = name.find('.');
    const std::string base = name.substr(0, dot);
    const std::string overload = dot == std::string::npos ? "" : name.substr(dot + 1);
    auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(("aten::" + base).c_str(), overload.c_str());
    library->impl(name.c_str(),
                  torch::CppFunction::makeFromBoxedFunctor(std::make_unique<RedirectKernel>(handle.schema())));
    ++count;
  }
  return count;
}

std::vector<std::pair<std::string, int64_t>> aten_operator_kernels() {
  static constexpr c10::DispatchKey kSelectionKeys[] = {
      c10::DispatchKey::PrivateUse1, c10::DispatchKey::CPU, c10::DispatchKey::CompositeImplicitAutograd,
      c10::DispatchKey::CompositeExplicitAutograd, c10::DispatchKey::CompositeExplicitAutogradNonFunctional};
  auto& dispatcher = c10::Dispatcher::singleton();
  std::vector<std::pair<std::string, int64_t>> kernels;
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) {
      continue;
    }
    const auto handle = dispatcher.findOp(name);
    if (!handle.has_value()) {
      continue;
    }
    int64_t bits = 0;
    for (size_t i = 0; i < std::size(kSelectionKeys); ++i) {
      if (handle->hasKernelForDispatchKey(kSelectionKeys[i])) {
        bits |= int64_t(1) << i;
      }
    }
    std::string short_name = name.name.substr(6);
    if (!name.overload_name.empty()) {
      short_name += "." + name.overload_name;
    }
    kernels.emplace_back(std::move(short_name), bits);
  }
  return kernels;
}

int64_t redirect_calls() {
  return RedirectCall::calls_on_this_thread();
}

at::Tensor cpu_alias(const at::Tensor& npu) {
  TORCH_CHECK(npu.device().type() == kNpu, "cpu_alias expects an npu tensor, got one on ", npu.device());
  return make_cpu_alias(npu, /*owning=*/false);
}

at::Tensor owning_cpu_alias(const at::Tensor& npu) {
  TORCH_CHECK(npu.device().type() == kNpu, "owning_cpu_alias expects an npu tensor, got one on ", npu.device());
  return make_cpu_alias(npu, /*owning=*/true);
}

}  // namespace vnpu

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&vnpu::redirect_fallback>());
}
