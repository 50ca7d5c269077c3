#include "runtime/ExternalStream.h"

#include "runtime/Device.h"
#include "runtime/ErrorCode.h"
#include "runtime/Stream.h"

#include <c10/util/Exception.h>

#include <array>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace vnpu {
namespace {

constexpr int kExternalSlots = 1 << kStreamIdTypeShift;
constexpr size_t kPageSize = 4096;

struct RawStreams {
  std::mutex mutex;
  // Handles are the addresses of live one-byte allocations: unique, non-zero, never reused while alive.
  std::unordered_map<void*, std::unique_ptr<char>> live;
  std::unordered_map<void*, size_t> host_registered;
  std::array<std::array<void*, kExternalSlots>, kMaxDevices> slots{};
};

RawStreams& raw() {
  static auto* r = new RawStreams();
  return *r;
}

// On a card, PER_STREAM_QUEUE=1 (with the task queue on, TASK_QUEUE_ENABLE 1 or 2, its default)
// gives every stream its own queue, which a stream created outside torch_npu does not have.
bool per_stream_queue_enabled() {
  static const bool on = [] {
    const char* psq = std::getenv("PER_STREAM_QUEUE");
    const char* tq = std::getenv("TASK_QUEUE_ENABLE");
    const std::string queue = tq == nullptr ? "1" : tq;
    return psq != nullptr && std::string(psq) == "1" && (queue == "1" || queue == "2");
  }();
  return on;
}

}  // namespace

int create_raw_stream(void** out) {
  if (out == nullptr) {
    return kAclErrorInvalidParam;
  }
  auto& r = raw();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto cell = std::make_unique<char>(0);
  void* handle = cell.get();
  r.live.emplace(handle, std::move(cell));
  *out = handle;
  return kAclSuccess;
}

int destroy_raw_stream(void* handle) {
  if (handle == nullptr) {
    return kAclErrorInvalidParam;
  }
  auto& r = raw();
  std::lock_guard<std::mutex> lock(r.mutex);
  if (r.live.erase(handle) == 0) {
    return kAclErrorRtParamInvalid;
  }
  for (auto& device_slots : r.slots) {
    for (auto& slot : device_slots) {
      if (slot == handle) {
        slot = nullptr;
      }
    }
  }
  return kAclSuccess;
}

int host_register(void* ptr, size_t size, uint32_t flags) {
  const bool known_flags = flags != 0 && (flags & ~(kAclHostRegMapped | kAclHostRegPinned)) == 0;
  if (ptr == nullptr || size == 0 || !known_flags) {
    return kAclErrorInvalidParam;
  }
  // Mapping into the device's address space works on whole pages only.
  if ((flags & kAclHostRegMapped) != 0 &&
      (reinterpret_cast<uintptr_t>(ptr) % kPageSize != 0 || size % kPageSize != 0)) {
    return kAclErrorInvalidParam;
  }
  auto& r = raw();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.host_registered.emplace(ptr, size).second ? kAclSuccess : kAclErrorRtParamInvalid;
}

int host_unregister(void* ptr) {
  if (ptr == nullptr) {
    return kAclErrorInvalidParam;
  }
  auto& r = raw();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.host_registered.erase(ptr) == 1 ? kAclSuccess : kAclErrorRtParamInvalid;
}

c10::Stream external_stream(c10::DeviceIndex device, void* handle) {
  TORCH_CHECK(handle != nullptr, "ExternalStream needs a non-null raw stream",
              error_suffix(SubModule::kPta, kErrParam, "invalid parameter"));
  if (device < 0) {
    device = current_device();
  }
  check_device_index(device);
  auto& r = raw();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto& slots = r.slots[static_cast<size_t>(device)];
  int free_slot = -1;
  for (int i = 0; i < kExternalSlots; ++i) {
    if (slots[i] == handle) {
      free_slot = i;
      break;
    }
    if (slots[i] == nullptr && free_slot < 0) {
      free_slot = i;
    }
  }
  TORCH_CHECK(free_slot >= 0, "npu:", static_cast<int>(device), " already wraps ", kExternalSlots,
              " external streams; destroy one with npuStreamDestroy first",
              error_suffix(SubModule::kPta, kErrParam, "invalid parameter"));
  slots[free_slot] = handle;
  const auto id = (static_cast<c10::StreamId>(StreamType::External) << kStreamIdTypeShift) | free_slot;
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, device), id);
}

void* external_stream_handle(c10::Stream stream) {
  TORCH_CHECK(!per_stream_queue_enabled(),
              "External NPU stream is not supported in NPUStream::stream() with per-stream task queue.",
              error_suffix(SubModule::kPta, kErrNotSupport, "feature not supported"));
  const auto slot = static_cast<size_t>(stream.id() & (kExternalSlots - 1));
  auto& r = raw();
  std::lock_guard<std::mutex> lock(r.mutex);
  void* handle = r.slots[static_cast<size_t>(stream.device_index())][slot];
  TORCH_CHECK(handle != nullptr, "Invalid stream id ", stream.id(),
              " for npu:", static_cast<int>(stream.device_index()), ": no external stream is wrapped in that slot",
              error_suffix(SubModule::kPta, kErrParam, "invalid parameter"));
  return handle;
}

}  // namespace vnpu
