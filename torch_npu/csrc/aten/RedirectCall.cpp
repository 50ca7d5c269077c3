#include "aten/RedirectCall.h"

#include "aten/CpuOperandError.h"

#include "runtime/Device.h"
#include "runtime/ErrorCode.h"
#include "runtime/Generator.h"

#include <algorithm>
#include <cctype>

namespace vnpu {
namespace {

[[noreturn]] void device_mismatch(const OpFacts& facts, int arg, c10::Device got, c10::Device expected) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but got ",
              facts.arg_names[static_cast<size_t>(arg)], " is on ", got, ", different from other tensors on ", expected,
              " (when checking argument in method ", facts.name, ")");
}

thread_local int64_t tl_calls = 0;

}  // namespace

RedirectCall::RedirectCall(const OpFacts& facts) : facts_(facts) {
  if (C10_UNLIKELY(g_in_bad_fork)) {
    check_not_in_bad_fork();
  }
  ++tl_calls;
}

int64_t RedirectCall::calls_on_this_thread() {
  return tl_calls;
}

void RedirectCall::unsupported_layout(c10::Layout layout) const {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "The operator '", facts_.name, "' got a ", layout_name(layout),
                              " tensor: sparse, quantized and nested tensors are not supported on npu (only "
                              "strided, dense tensors are)");
}

void RedirectCall::rethrow_for_npu(const c10::NotImplementedError& error) const {
  const std::string& message = error.msg();
  const auto close = message.size() > 1 && message[0] == '"' ? message.find('"', 1) : std::string::npos;
  if (close != std::string::npos) {
    std::string kernel = message.substr(1, close - 1);
    std::string lowered = kernel;
    std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](unsigned char c) { return std::tolower(c); });
    if (lowered.find("cpu") != std::string::npos) {
      auto name = facts_.name.substr(facts_.name.find("::") + 2);
      name = name.substr(0, name.find('.'));
      TORCH_CHECK_NOT_IMPLEMENTED(false, "\"", name, "_npu\"", message.substr(close + 1));
    }
  }
  throw error;
}

void RedirectCall::rethrow_for_npu(const c10::Error& error) const {
  static const char* const kParameterChecks[] = {"div expected rounding_mode"};
  for (const char* prefix : kParameterChecks) {
    if (error.msg().rfind(prefix, 0) == 0) {
      TORCH_CHECK(false, error.msg(), ops_param_error());
    }
  }
  throw;
}

at::Tensor RedirectCall::tensor(const at::Tensor& t, int arg) {
  if (!t.defined()) {
    return t;
  }
  if (t.device().type() == kNpu) {
    if (C10_UNLIKELY(t.layout() != c10::kStrided)) {
      unsupported_layout(t.layout());
    }
    const auto index = t.device().index();
    if (npu_arg_ < 0) {
      npu_arg_ = arg;
      if (!map.explicit_device) {
        map.device = index;
      }
    } else if (index != map.device && !facts_.mixes_devices && !map.explicit_device) {
      device_mismatch(facts_, arg, t.device(), c10::Device(kNpu, map.device));
    }
    // Indices on npu for a tensor on the CPU: PyTorch's indexing refuses them.
    TORCH_CHECK(!(facts_.indexes_by_tensors && arg == 1 && cpu_self_), "indices should be either on cpu or on the ",
                "same device as the indexed tensor (cpu)");
    return map.alias_input(t, arg);
  }
  if (arg == 0 && facts_.indexes_by_tensors) {
    cpu_self_ = true;
  }
  map.cpu_inputs.push_back(t.unsafeGetTensorImpl());
  if (stray_cpu_arg_ < 0 && !facts_.mixes_devices && t.dim() > 0 && !t.unsafeGetTensorImpl()->is_wrapped_number()) {
    stray_cpu_arg_ = arg;
    stray_cpu_device_ = t.device();
  }
  return t;
}

c10::Device RedirectCall::device(c10::Device d) {
  if (d.type() == kNpu) {
    const auto index = d.has_index() ? d.index() : current_device();
    check_device_index(index);
    map.device = index;
    map.explicit_device = true;
    return c10::Device(c10::kCPU);
  }
  if (d.is_cpu()) {
    map.keep_cpu = true;
  }
  return d;
}

void RedirectCall::layout(c10::Layout layout) const {
  if (layout != c10::kStrided) {
    unsupported_layout(layout);
  }
}

void RedirectCall::settle() {
  if (map.device < 0) {
    map.device = current_device();
  }
  if (C10_UNLIKELY(g_stopped_devices.load(std::memory_order_relaxed) != 0)) {
    check_device_running(map.device);
  }
  if (stray_cpu_arg_ >= 0 && npu_arg_ >= 0 && !map.keep_cpu) {
    const std::string message = cpu_operand_message(facts_.name);
    TORCH_CHECK(message.empty(), message);
    device_mismatch(facts_, stray_cpu_arg_, stray_cpu_device_, c10::Device(kNpu, map.device));
  }
}

void RedirectCall::reflect_writes() {
  if (facts_.writes_arguments) {
    map.sync_written(facts_.written);
  }
}

std::optional<at::Generator> RedirectCall::generator(const std::optional<at::Generator>& g) const {
  if (!g.has_value() || !g->defined()) {
    if (on_npu()) {
      return engine_of(default_generator(map.device));
    }
    return g;
  }
  if (is_npu_generator(*g)) {
    TORCH_CHECK(on_npu(), "Expected a 'cpu' device type for generator but found 'npu'");
    return engine_of(*g);
  }
  TORCH_CHECK(!on_npu(), "Expected a 'npu' device type for generator but found '", g->device().type(), "'");
  return g;
}

}  // namespace vnpu
