#include "runtime/ProcessRegistry.h"

#include "runtime/Device.h"
#include "runtime/SocProfile.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>

namespace vnpu {
namespace {

std::mutex g_mu;
RegistryEntry* g_entry = nullptr;
pid_t g_owner = 0;  // the process the entry belongs to (a forked child makes its own)
std::string g_name;

std::string shm_name(pid_t pid) {
  return "/vnpu-smi." + std::to_string(pid);
}

int64_t own_start_time() {
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) {
    return 0;
  }
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) {
      return std::stoll(field);
    }
  }
  return 0;
}

std::string own_name() {
  std::ifstream comm("/proc/self/comm");
  std::string name;
  std::getline(comm, name);
  return name;
}

void remove_entry() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_entry != nullptr && g_owner == getpid()) {
    shm_unlink(g_name.c_str());
  }
}

RegistryEntry* entry_locked() {
  const pid_t pid = getpid();
  if (g_entry != nullptr && g_owner == pid) {
    return g_entry;
  }
  // First segment of this process (or of a forked child, whose inherited mapping is its parent's).
  const std::string name = shm_name(pid);
  const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
  if (fd < 0) {
    return nullptr;  // no /dev/shm: npu-smi just does not see this process
  }
  if (ftruncate(fd, sizeof(RegistryEntry)) != 0) {
    close(fd);
    shm_unlink(name.c_str());
    return nullptr;
  }
  void* p = mmap(nullptr, sizeof(RegistryEntry), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name.c_str());
    return nullptr;
  }
  auto* e = static_cast<RegistryEntry*>(p);
  std::memset(e, 0, sizeof(RegistryEntry));
  e->pid = pid;
  e->start_time = own_start_time();
  std::snprintf(e->name, sizeof(e->name), "%s", own_name().c_str());
  std::snprintf(e->soc, sizeof(e->soc), "%s", soc_profile().name);
  e->capacity = device_capacity();
  for (int device = 0; device < kRegistryDevices && device < device_count(); ++device) {
    const int physical = physical_device_id(static_cast<c10::DeviceIndex>(device));
    if (physical >= 0 && physical < kRegistryDevices) {
      g_busy_flags[device] = reinterpret_cast<std::atomic<uint8_t>*>(&e->busy[physical]);
    }
  }
  std::memcpy(e->magic, "VNPUSMI2", 8);  // last: a reader ignores an entry without it
  const bool first = g_owner == 0;
  g_entry = e;
  g_owner = pid;
  g_name = name;
  if (first) {
    std::atexit(remove_entry);  // inherited by forked children, who remove their own entry
  }
  return e;
}

}  // namespace

std::atomic<uint8_t>* g_busy_flags[kRegistryDevices] = {};

void publish_reserved(c10::DeviceIndex device, int64_t reserved_bytes) {
  const int physical = physical_device_id(device);  // npu-smi numbers the machine's devices
  if (physical < 0 || physical >= kRegistryDevices) {
    return;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  RegistryEntry* e = entry_locked();
  if (e != nullptr) {
    reinterpret_cast<std::atomic<int64_t>*>(&e->reserved[physical])->store(reserved_bytes, std::memory_order_relaxed);
  }
}

}  // namespace vnpu
