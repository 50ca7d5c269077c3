#include "runtime/HostMemory.h"

#include "runtime/CachingAllocator.h"
#include "runtime/SegmentArena.h"

#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace vnpu {
namespace {

constexpr size_t kHeadroom = size_t(512) << 20;       // left to the rest of the process and the OS
constexpr size_t kCheckAvailable = size_t(16) << 20;  // segments this large look at MemAvailable

// Reads a "Key:   N kB" line of /proc/meminfo; 0 if unavailable.
size_t meminfo_bytes(const char* key) {
  FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) {
    return 0;
  }
  char line[256];
  size_t value = 0;
  const size_t key_len = std::strlen(key);
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, key, key_len) == 0 && line[key_len] == ':') {
      unsigned long long kb = 0;
      if (std::sscanf(line + key_len + 1, "%llu", &kb) == 1) {
        value = static_cast<size_t>(kb) * 1024;
      }
      break;
    }
  }
  std::fclose(f);
  return value;
}

// The host memory available now when it is too little for `bytes` more (with the headroom), else 0. Only large
// requests look: reading /proc/meminfo costs more than a small allocation.
size_t available_when_short(size_t bytes) {
  if (bytes < kCheckAvailable) {
    return 0;
  }
  const size_t available = meminfo_bytes("MemAvailable");
  return available != 0 && bytes + kHeadroom > available ? available : 0;
}

}  // namespace

bool host_can_back(size_t bytes, size_t mapped, std::string& note) {
  static const size_t total = meminfo_bytes("MemTotal");
  if (total == 0) {
    return true;  // no /proc/meminfo: leave it to mmap
  }
  if (mapped + bytes + kHeadroom > total) {
    note = " [vnpu] This host cannot back it: npu memory lives in host memory, the npu pools already hold " +
           format_size(mapped) + " and the machine has " + format_size(total) +
           " in total. Lower VNPU_DEVICE_MEMORY (or use a smaller VNPU_SOC) to model a card that fits.";
    return false;
  }
  if (const size_t available = available_when_short(bytes)) {
    note = " [vnpu] This host cannot back it: npu memory lives in host memory and only " + format_size(available) +
           " of host memory is available now. Free host memory or lower VNPU_DEVICE_MEMORY.";
    return false;
  }
  return true;
}

bool host_can_hold_copy(size_t bytes, std::string& note) {
  const size_t available = available_when_short(bytes);
  if (available == 0) {
    return true;
  }
  note = " [vnpu] This host cannot hold the copy: npu memory lives in host memory and only " + format_size(available) +
         " of host memory is available now (on a card the npu tensors would not take any). Free host memory or "
         "lower VNPU_DEVICE_MEMORY.";
  return false;
}

bool read_plan_mode() {
  const char* env = std::getenv("VNPU_PLAN");
  return env != nullptr && std::string(env) == "1";
}

bool plan_over_capacity() {
  static const bool on = [] {
    const char* env = std::getenv("VNPU_PLAN_OVER_CAPACITY");
    return plan_mode() && env != nullptr && std::string(env) == "1";
  }();
  return on;
}

void* map_segment_memory(size_t bytes) {
  if (!plan_mode()) {
    if (void* shared = arena_map(bytes)) {
      return shared;
    }
  }
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | (plan_mode() ? MAP_NORESERVE : 0);
  void* ptr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
  return ptr == MAP_FAILED ? nullptr : ptr;
}

void unmap_segment_memory(void* ptr, size_t bytes) {
  if (!arena_unmap(ptr, bytes)) {
    munmap(ptr, bytes);
  }
}

}  // namespace vnpu
