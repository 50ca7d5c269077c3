// An npu tensor's private format (NZ, NC1HWC0 ...) travels with torch.save / torch.load as torch_npu's
// does: PyTorch's backend metadata for PrivateUse1 tensors carries "npu_format_<format>", and loading
// marks the restored storage (whose bytes already have the format's physical size) with it.
#include "runtime/CachingAllocator.h"

#include <torch/csrc/jit/serialization/pickler_helper.h>

#include <string>
#include <unordered_map>

namespace vnpu {
namespace {

constexpr const char* kFormatKey = "npu_format_";

void save_format(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  if (!t.has_storage()) {
    return;
  }
  const int32_t format = storage_format(t.storage().data_ptr()).first;
  if (format >= 0) {
    metadata[kFormatKey + std::to_string(format)] = true;
  }
}

void load_format(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  const std::string prefix(kFormatKey);
  for (const auto& [key, present] : metadata) {
    if (present && key.rfind(prefix, 0) == 0 && t.has_storage()) {
      const int32_t format = std::stoi(key.substr(prefix.size()));
      const int64_t numel = static_cast<int64_t>(t.storage().nbytes() / t.element_size());
      // the base is the loaded tensor's when it covers its storage from the start (the tensor it was saved for)
      const bool whole = t.storage_offset() == 0 && t.is_contiguous();
      set_storage_format(
          t.storage().data_ptr(), format, numel,
          whole ? std::optional<StorageBase>(StorageBase{t.sizes().vec(), t.scalar_type()}) : std::nullopt);
    }
  }
}

const bool registered = [] {
  torch::jit::TensorBackendMetaRegistry(c10::DeviceType::PrivateUse1, &save_format, &load_format);
  return true;
}();

}  // namespace
}  // namespace vnpu
