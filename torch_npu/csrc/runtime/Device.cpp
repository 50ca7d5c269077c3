#include "runtime/Device.h"

#include <c10/util/Exception.h>

#include <pthread.h>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <mutex>
#include <string>

namespace vnpu {
namespace {

struct DeviceTable {
  std::vector<int> physical;  // visible index -> physical id
  std::string error;
  std::string environment;  // the variables it was read from
};

// VNPU_DEVICE_COUNT: how many NPUs the virtual machine has (default 8, like an Atlas 800T A2).
int parse_physical_count(std::string& error) {
  const char* env = std::getenv("VNPU_DEVICE_COUNT");
  if (env == nullptr || *env == '\0') {
    return 8;
  }
  std::string s(env);
  bool digits = !s.empty() && s.size() <= 3;
  for (char ch : s) {
    digits = digits && std::isdigit(static_cast<unsigned char>(ch));
  }
  int n = digits ? std::atoi(s.c_str()) : -1;
  if (n < 0 || n > kMaxDevices) {
    error = "VNPU_DEVICE_COUNT='" + s + "' is invalid: expected an integer from 0 to " + std::to_string(kMaxDevices) +
            " (the number of virtual NPUs)";
    return 0;
  }
  return n;
}

// ASCEND_RT_VISIBLE_DEVICES as torch_npu reads it: a comma list of ascending physical ids;
// parsing stops at the first character that is neither a digit nor a comma; ids beyond the
// physical count end the list; a list that is not ascending makes no device visible.
std::vector<int> parse_visible(int physical_count, std::string& error) {
  std::vector<int> all;
  for (int i = 0; i < physical_count; ++i) {
    all.push_back(i);
  }
  const char* env = std::getenv("ASCEND_RT_VISIBLE_DEVICES");
  if (env == nullptr) {
    return all;
  }
  std::vector<int> ids;
  std::string token;
  auto flush = [&](bool& stop) {
    if (token.empty()) {
      return;
    }
    const int id = token.size() > 6 ? kMaxDevices : std::atoi(token.c_str());
    token.clear();
    if (id >= physical_count) {
      stop = true;
      return;
    }
    ids.push_back(id);
  };
  bool stop = false;
  for (const char* p = env; *p != '\0' && !stop; ++p) {
    if (std::isdigit(static_cast<unsigned char>(*p))) {
      token.push_back(*p);
    } else if (*p == ',') {
      flush(stop);
    } else {
      break;
    }
  }
  if (!stop) {
    flush(stop);
  }
  for (size_t i = 1; i < ids.size(); ++i) {
    if (ids[i] <= ids[i - 1]) {
      error = std::string("ASCEND_RT_VISIBLE_DEVICES='") + env +
              "' is invalid: device ids must be listed in ascending order without repeats, so no NPU "
              "is visible (torch_npu behaves the same)";
      return {};
    }
  }
  if (ids.empty() && *env != '\0') {
    error = std::string("ASCEND_RT_VISIBLE_DEVICES='") + env + "' selects no device: the machine has " +
            std::to_string(physical_count) + " NPUs (ids 0 to " + std::to_string(physical_count - 1) +
            ", VNPU_DEVICE_COUNT)";
  }
  return ids;
}

std::string device_environment() {
  std::string key;
  for (const char* name : {"VNPU_DEVICE_COUNT", "ASCEND_RT_VISIBLE_DEVICES"}) {
    const char* value = std::getenv(name);
    key += value == nullptr ? std::string("-") : std::string("=") + value;  // unset differs from empty
    key += '\n';
  }
  return key;
}

// Until the runtime is initialised the table follows the environment, as torch_npu's device count
// does (ACL reads ASCEND_RT_VISIBLE_DEVICES at initialisation); from then on it is fixed. Tables that
// were replaced stay allocated: a caller may still hold a reference to one.
std::atomic<const DeviceTable*> g_table{nullptr};
std::atomic<bool> g_table_fixed{false};
std::mutex g_table_mutex;

const DeviceTable& table() {
  const DeviceTable* current = g_table.load(std::memory_order_acquire);
  if (C10_LIKELY(current != nullptr && g_table_fixed.load(std::memory_order_acquire))) {
    return *current;
  }
  const std::string environment = device_environment();
  std::lock_guard<std::mutex> lock(g_table_mutex);
  current = g_table.load(std::memory_order_acquire);
  if (current != nullptr && (g_table_fixed.load() || current->environment == environment)) {
    return *current;
  }
  auto* fresh = new DeviceTable();
  fresh->environment = environment;
  const int count = parse_physical_count(fresh->error);
  if (fresh->error.empty()) {
    fresh->physical = parse_visible(count, fresh->error);
  }
  g_table.store(fresh, std::memory_order_release);
  return *fresh;
}

thread_local c10::DeviceIndex tl_current = 0;

}  // namespace

bool g_in_bad_fork = false;

std::atomic<c10::DeviceIndex> g_fixed_device_count{0};

void fix_device_table() {
  const auto count = static_cast<c10::DeviceIndex>(table().physical.size());
  g_table_fixed.store(true, std::memory_order_release);
  g_fixed_device_count.store(count, std::memory_order_relaxed);
}

void mark_device_initialized() {
  fix_device_table();
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, [] { g_in_bad_fork = true; });
    return true;
  }();
  (void)registered;
}

void check_not_in_bad_fork() {
  TORCH_CHECK(!g_in_bad_fork,
              "Cannot re-initialize NPU in forked subprocess. To use NPU with multiprocessing, you must use the "
              "'spawn' start method");
}

std::atomic<uint64_t> g_stopped_devices{0};
std::atomic<uint64_t> g_device_contexts{0};

void set_device_stopped(c10::DeviceIndex index, bool stopped) {
  check_device_index(index);
  const uint64_t bit = uint64_t(1) << index;
  if (stopped) {
    g_stopped_devices.fetch_or(bit);
  } else {
    g_stopped_devices.fetch_and(~bit);
  }
}

void check_device_running(c10::DeviceIndex index) {
  TORCH_CHECK(index < 0 || (g_stopped_devices.load() & (uint64_t(1) << index)) == 0, "npu:", static_cast<int>(index),
              " has been stopped by torch_npu.npu.stop_device(); call torch_npu.npu.restart_device(",
              static_cast<int>(index), ") before using it again");
}

c10::DeviceIndex read_device_count() noexcept {
  return static_cast<c10::DeviceIndex>(table().physical.size());
}

const std::string& device_config_error() {
  return table().error;
}

int physical_device_id(c10::DeviceIndex index) {
  check_device_index(index);
  return table().physical[index];
}

void check_device_index_slow(c10::DeviceIndex index) {
  const auto n = device_count();
  if (C10_LIKELY(index >= 0 && index < n)) {
    return;
  }
  if (n == 0) {
    TORCH_CHECK(false, "Invalid device npu:", static_cast<int>(index), ": no NPU device is visible",
                device_config_error().empty() ? std::string() : " (" + device_config_error() + ")");
  }
  // torch_npu's words first (its tests match them), then which device was asked for and how to get more
  TORCH_CHECK(false, "Invalid NPU device ordinal. Valid device ordinal ranges from 0 - ", static_cast<int>(n - 1),
              ". (npu:", static_cast<int>(index), " was asked for; set VNPU_DEVICE_COUNT or ASCEND_RT_VISIBLE_DEVICES",
              " to change the device count)");
}

c10::DeviceIndex current_device() {
  return tl_current;
}

void set_device(c10::DeviceIndex index) {
  check_device_index(index);
  tl_current = index;
  note_device_context(index);
}

c10::DeviceIndex exchange_device(c10::DeviceIndex index) {
  const auto previous = tl_current;
  if (index != previous) {
    check_device_index(index);
    tl_current = index;
  }
  note_device_context(index);
  return previous;
}

void set_device_unchecked(c10::DeviceIndex index) noexcept {
  if (index >= 0 && index < device_count()) {
    tl_current = index;
    note_device_context(index);
  }
}

}  // namespace vnpu
