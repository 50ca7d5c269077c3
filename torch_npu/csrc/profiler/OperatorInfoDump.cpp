#include "profiler/OperatorInfoDump.h"

#include "aten/OpHooks.h"
#include "runtime/CachingAllocator.h"

#include <mutex>
#include <sstream>
#include <unordered_set>

namespace vnpu {
namespace {

// -1 when the storage was never given a private format (torch_npu/npu/_op_info_dump.py then names the
// rank's default, as torch_npu.get_npu_format does).
OperatorTensorInfo tensor_info(std::string name, const at::Tensor& t) {
  const int32_t format = t.has_storage() ? storage_format(t.storage().data_ptr()).first : -1;
  return {std::move(name), t.scalar_type(), t.sizes().vec(), format};
}

// Tensors (and tensor lists, element by element) as tensor descriptions, other values as attributes.
void describe(const std::string& name, const c10::IValue& value, std::vector<OperatorTensorInfo>& tensors,
              std::vector<std::pair<std::string, c10::IValue>>* attrs) {
  if (value.isTensor()) {
    if (value.toTensor().defined()) {
      tensors.push_back(tensor_info(name, value.toTensor()));
    }
  } else if (value.isTensorList() || value.isList()) {
    const bool tensors_only =
        value.isTensorList() || (value.isList() && !value.toList().empty() && value.toList().get(0).isTensor());
    if (!tensors_only) {
      if (attrs != nullptr) {
        attrs->emplace_back(name, value);
      }
      return;
    }
    const auto list = value.toList();
    for (size_t i = 0; i < list.size(); ++i) {
      describe(name + "[" + std::to_string(i) + "]", list.get(i), tensors, nullptr);
    }
  } else if (attrs != nullptr && !value.isGenerator()) {
    attrs->emplace_back(name, value);
  }
}

std::string key_of(const OperatorInfo& info) {
  std::ostringstream key;
  key << info.op;
  for (const auto* side : {&info.inputs, &info.outputs}) {
    key << '|';
    for (const auto& t : *side) {
      key << t.name << ':' << c10::toString(t.dtype) << ':' << c10::IntArrayRef(t.shape) << ':' << t.format << ';';
    }
  }
  for (const auto& [name, value] : info.attrs) {
    key << '|' << name << '=' << value;
  }
  return key.str();
}

class OperatorInfoHook final : public OpHook {
 public:
  void after(const OpCall& call) override {
    OperatorInfo info{call.facts.name, {}, {}, {}};
    for (size_t i = 0; i < call.inputs.size(); ++i) {
      const std::string name = i < call.facts.arg_names.size() ? call.facts.arg_names[i] : "arg" + std::to_string(i);
      describe(name, call.inputs[i], info.inputs, &info.attrs);
    }
    for (size_t i = 0; i < call.outputs.size(); ++i) {
      describe(call.outputs.size() == 1 ? "result" : "result" + std::to_string(i), call.outputs[i], info.outputs,
               nullptr);
    }
    std::string key = key_of(info);
    std::lock_guard<std::mutex> guard(mu_);
    if (seen_.insert(std::move(key)).second) {
      calls_.push_back(std::move(info));
    }
  }

  std::vector<OperatorInfo> take() {
    std::lock_guard<std::mutex> guard(mu_);
    seen_.clear();
    return std::exchange(calls_, {});
  }

 private:
  std::mutex mu_;
  std::unordered_set<std::string> seen_;
  std::vector<OperatorInfo> calls_;
};

HookSession<OperatorInfoHook>& session() {
  static auto* s = new HookSession<OperatorInfoHook>();
  return *s;
}

}  // namespace

void start_operator_info_dump() {
  session().start();
}

std::vector<OperatorInfo> stop_operator_info_dump() {
  auto hook = session().stop();
  return hook ? hook->take() : std::vector<OperatorInfo>{};
}

bool operator_info_dump_active() {
  return session().active();
}

}  // namespace vnpu
