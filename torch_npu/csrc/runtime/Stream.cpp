#include "runtime/Stream.h"

#include "runtime/Device.h"
#include "runtime/DeviceTrace.h"
#include "runtime/ErrorCode.h"
#include "runtime/ExternalStream.h"

#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>

namespace vnpu {
namespace {

constexpr int kPoolCapacity = 32;
constexpr int kSyncLaunchStreamsPerPool = 4;
constexpr int kTypes = 6;

// Stable per-stream addresses serve as the raw stream handles torch_npu exposes (npu_stream).
struct StreamHandles {
  std::array<std::array<std::array<char, kPoolCapacity>, kTypes>, kMaxDevices> slot{};
};
StreamHandles& handles() {
  static auto* h = new StreamHandles();
  return *h;
}

std::array<std::atomic<uint32_t>, kMaxDevices> g_next_normal{};
std::array<std::atomic<uint32_t>, kMaxDevices> g_next_high{};
thread_local std::array<c10::StreamId, kMaxDevices> tl_current{};

c10::DeviceIndex resolve(c10::DeviceIndex device) {
  if (device < 0) {
    device = current_device();
  }
  check_device_index(device);
  return device;
}

c10::StreamId encode(StreamType type, int index) {
  return (static_cast<c10::StreamId>(type) << kStreamIdTypeShift) | index;
}

// How many streams the pool of a stream type holds.
int pool_size(int type) {
  switch (static_cast<StreamType>(type)) {
    case StreamType::Default: return 1;
    case StreamType::SyncLaunch: return kSyncLaunchStreamsPerPool;
    case StreamType::External: return kPoolCapacity;
    default: return streams_per_device();
  }
}

}  // namespace

int streams_per_device() {
  static const int n = [] {
    const char* env = std::getenv("STREAMS_PER_DEVICE");
    if (env == nullptr) {
      return kPoolCapacity;
    }
    std::string v(env);
    if (v == "8" || v == "32") {
      return std::stoi(v);
    }
    TORCH_WARN("STREAMS_PER_DEVICE='", v, "' is not supported (use 8 or 32); using 32 streams per device.");
    return kPoolCapacity;
  }();
  return n;
}

c10::Stream default_stream(c10::DeviceIndex device) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, resolve(device)), 0);
}

c10::Stream current_stream(c10::DeviceIndex device) {
  device = resolve(device);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, device), tl_current[device]);
}

c10::Stream exchange_stream(c10::Stream stream) {
  const auto device = resolve(stream.device_index());
  auto previous = c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, device), tl_current[device]);
  tl_current[device] = stream.id();
  return previous;
}

c10::Stream pool_stream(c10::DeviceIndex device, int priority) {
  device = resolve(device);
  const bool high = priority < 0;
  auto& counter = high ? g_next_high[device] : g_next_normal[device];
  const int index = static_cast<int>(counter++ % static_cast<uint32_t>(streams_per_device()));
  const auto stream = c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, device),
                                  encode(high ? StreamType::High : StreamType::Normal, index));
  trace::fire(trace::Point::StreamCreation, stream_native_handle(stream));
  return stream;
}

c10::Stream make_stream(c10::StreamId id, c10::DeviceIndex device) {
  device = resolve(device);
  const auto type = id >> kStreamIdTypeShift;
  const auto index = id & ((1 << kStreamIdTypeShift) - 1);
  const bool valid =
      id >= 0 && type <= static_cast<int>(StreamType::External) && index < pool_size(static_cast<int>(type));
  TORCH_CHECK(valid, "Invalid stream id ", id, " for npu:", static_cast<int>(device),
              ": it is not a stream this device created (stream_id encodes type << 5 | pool index)",
              error_suffix(SubModule::kPta, kErrParam, "invalid parameter"));
  const auto stream = c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, device), id);
  if (type == static_cast<int>(StreamType::External)) {
    external_stream_handle(stream);  // the slot must wrap a raw stream
  }
  return stream;
}

c10::Stream stream_from_parts(int64_t id, int64_t device_index, int64_t device_type) {
  TORCH_CHECK(device_type == static_cast<int64_t>(kNpu), "Invalid device type ", device_type,
              " for an npu stream: expected ", static_cast<int>(kNpu), " (PrivateUse1)",
              error_suffix(SubModule::kPta, kErrParam, "invalid parameter"));
  TORCH_CHECK(device_index >= 0 && device_index < device_count(), "Invalid device index ", device_index,
              " for an npu stream: ", static_cast<int>(device_count()), " npu devices are visible",
              error_suffix(SubModule::kPta, kErrParam, "invalid parameter"));
  return make_stream(id, static_cast<c10::DeviceIndex>(device_index));
}

c10::Stream typed_pool_stream(c10::DeviceIndex device, StreamType type) {
  static std::array<std::array<std::atomic<uint32_t>, kTypes>, kMaxDevices> counters{};
  device = resolve(device);
  const auto t = static_cast<size_t>(type);
  TORCH_CHECK(t >= 1 && t < kTypes, "invalid stream type ", static_cast<int>(type));
  const auto pool = static_cast<uint32_t>(pool_size(static_cast<int>(type)));
  const int index = static_cast<int>(counters[static_cast<size_t>(device)][t]++ % pool);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, device), encode(type, index));
}

int stream_priority(c10::Stream stream) {
  return (stream.id() >> kStreamIdTypeShift) == static_cast<int>(StreamType::High) ? -1 : 0;
}

void* stream_native_handle(c10::Stream stream) {
  if ((stream.id() >> kStreamIdTypeShift) == static_cast<int>(StreamType::External)) {
    return external_stream_handle(stream);
  }
  const auto type = static_cast<size_t>(stream.id() >> kStreamIdTypeShift) % kTypes;
  const auto index = static_cast<size_t>(stream.id() & ((1 << kStreamIdTypeShift) - 1));
  return &handles().slot[static_cast<size_t>(stream.device_index())][type][index];
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace vnpu
