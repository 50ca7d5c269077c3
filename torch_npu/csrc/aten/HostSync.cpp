#include "aten/HostSync.h"

#include "runtime/Device.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <mutex>
#include <unordered_set>

namespace vnpu {
namespace {

bool is_tensor_on(const c10::IValue& v, c10::DeviceType type) {
  return v.isTensor() && v.toTensor().defined() && v.toTensor().device().type() == type;
}

class SyncDebugHook final : public OpHook {
 public:
  explicit SyncDebugHook(int mode) : mode_(mode) {}
  void before(const c10::OperatorHandle& op, const OpFacts& facts, const std::vector<c10::IValue>& inputs) override {
    const std::string why = host_sync_reason(op, inputs);
    if (why.empty()) {
      return;
    }
    if (mode_ == 2) {
      TORCH_CHECK(false, "called a synchronizing NPU operation: ", facts.name, " ", why);
    }
    TORCH_WARN("called a synchronizing NPU operation: ", facts.name, " ", why);
  }

 private:
  int mode_;
};

std::mutex g_mu;
int g_mode = 0;
std::shared_ptr<OpHook> g_hook;

}  // namespace

bool reads_device_memory_on_host(const std::string& name) {
  static const std::unordered_set<std::string> host_reads = {
      "aten::equal",      "aten::is_nonzero",         "aten::nonzero",       "aten::_unique2",
      "aten::unique_dim", "aten::unique_consecutive", "aten::masked_select", "aten::allclose"};
  return host_reads.count(name) > 0;
}

std::string host_sync_reason(const c10::OperatorHandle& op, const std::vector<c10::IValue>& inputs) {
  const std::string& name = op.schema().name();
  if (name == "aten::_local_scalar_dense" || reads_device_memory_on_host(name)) {
    return "reads device memory on the host";
  }
  const bool to_cpu = name == "aten::_to_copy" && std::any_of(inputs.begin(), inputs.end(), [](const c10::IValue& v) {
                        return v.isDevice() && v.toDevice().is_cpu();
                      });
  const bool copy_to_cpu = name == "aten::copy_" && inputs.size() >= 2 && is_tensor_on(inputs[0], c10::kCPU) &&
                           is_tensor_on(inputs[1], kNpu);
  if (to_cpu || copy_to_cpu) {
    return "copies device memory to the host";
  }
  return {};
}

void set_sync_debug_mode(int mode) {
  TORCH_CHECK_VALUE(mode >= 0 && mode <= 2, "invalid value of debug_mode, expected one of 0, 1, 2");
  std::lock_guard<std::mutex> guard(g_mu);
  if (g_hook) {
    remove_op_hook(g_hook);
    g_hook.reset();
  }
  g_mode = mode;
  if (mode != 0) {
    g_hook = std::make_shared<SyncDebugHook>(mode);
    add_op_hook(g_hook);
  }
}

int sync_debug_mode() {
  std::lock_guard<std::mutex> guard(g_mu);
  return g_mode;
}

}  // namespace vnpu
