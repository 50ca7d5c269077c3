#include "distributed/SilentCheck.h"

#include "runtime/ErrorCode.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>

namespace vnpu {
namespace {

enum class ModelMode { kUnknown, kTrain, kInfer };
enum class CallState { kUnknown, kForward, kBackward };

std::atomic<ModelMode> g_model_mode{ModelMode::kUnknown};
std::atomic<CallState> g_call_state{CallState::kUnknown};

// The card checks this many collectives of a kind before it judges one (torch_npu passes it to the operator).
constexpr int64_t kMinSteps = 100;

// NPU_ASD_ENABLE: 0 off, 1 log faults, 2 stop at a fault, 3 log every value; read once, as torch_npu does.
int64_t silent_check_level() {
  static const int64_t level = [] {
    const char* text = std::getenv("NPU_ASD_ENABLE");
    if (text == nullptr) {
      return int64_t{0};
    }
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    return (end != text && *end == '\0' && value >= 0 && value <= 3) ? static_cast<int64_t>(value) : int64_t{0};
  }();
  return level;
}

std::pair<double, double> thresholds_from(const char* variable, std::pair<double, double> fallback) {
  const char* text = std::getenv(variable);
  if (text == nullptr) {
    return fallback;
  }
  const std::string s(text);
  const auto comma = s.find(',');
  if (comma == std::string::npos || s.find(',', comma + 1) != std::string::npos) {
    return fallback;
  }
  try {
    const double level1 = std::max(std::stod(s.substr(0, comma)), 3.0);
    const double level2 = std::max(std::stod(s.substr(comma + 1)), 3.0);
    return level1 > level2 ? std::make_pair(level1, level2) : fallback;
  } catch (const std::exception&) {
    TORCH_WARN("Invalid value for environment variable: ", variable, ". Use default values");
    return fallback;
  }
}

// What a rank sends to one peer is judged whatever the call state (torch_npu exempts point-to-point transfers from
// the backward-only rule); a receive buffer holds nothing of this rank's, so it is never judged.
bool judged_in_any_call_state(const std::string& collective) {
  return collective == "send";
}

}  // namespace

void set_module_train_state(const std::string& state) {
  TORCH_CHECK(state == "train" || state == "infer", "invalid value of train_state, expected one of `train`, `infer`",
              error_suffix(SubModule::kPta, kErrParam, "invalid parameter"));
  g_model_mode = state == "train" ? ModelMode::kTrain : ModelMode::kInfer;
}

void set_call_state(const std::string& state) {
  TORCH_CHECK(state == "forward" || state == "backward",
              "invalid value of call_state, expected one of `forward`, `backward`",
              error_suffix(SubModule::kPta, kErrParam, "invalid parameter"));
  g_call_state = state == "forward" ? CallState::kForward : CallState::kBackward;
}

std::pair<double, double> silent_check_upper_thresholds() {
  static const auto thresholds = thresholds_from("NPU_ASD_UPPER_THRESH", {1000000.0, 10000.0});
  return thresholds;
}

std::pair<double, double> silent_check_sigma_thresholds() {
  static const auto thresholds = thresholds_from("NPU_ASD_SIGMA_THRESH", {100000.0, 5000.0});
  return thresholds;
}

void CollectiveSilentCheck::before(const char* collective, const std::vector<at::Tensor>& tensors) {
  if (g_model_mode.load(std::memory_order_relaxed) != ModelMode::kTrain || silent_check_level() == 0) {
    return;
  }
  const std::string kind(collective);
  if (!judged_in_any_call_state(kind) && g_call_state.load(std::memory_order_relaxed) != CallState::kBackward) {
    return;
  }
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("npu::_npu_silent_check_v2", "")
                             .typed<at::Tensor(const at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&, int64_t,
                                               double, double, double, double, int64_t)>();
  for (const at::Tensor& input : tensors) {
    if ((input.scalar_type() != at::kFloat && input.scalar_type() != at::kBFloat16) || input.requires_grad()) {
      continue;
    }
    if (kind == "allreduce" && input.numel() <= 1) {
      continue;
    }
    auto found = histories_.find(kind);
    if (found == histories_.end()) {
      History fresh{at::zeros({1}, input.options().dtype(at::kLong)),
                    at::zeros({3}, input.options().dtype(at::kFloat))};
      found = histories_.emplace(kind, std::move(fresh)).first;
    }
    at::Tensor checked = input;
    const auto upper = silent_check_upper_thresholds();
    const auto sigma = silent_check_sigma_thresholds();
    op.call(at::norm(input), checked, found->second.sfda, found->second.step, kMinSteps, upper.first, sigma.first,
            upper.second, sigma.second, silent_check_level());
  }
}

}  // namespace vnpu
