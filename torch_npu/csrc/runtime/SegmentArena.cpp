#include "runtime/SegmentArena.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <mutex>

namespace vnpu {
namespace {

constexpr uint64_t kOffsetAlign = uint64_t{2} << 20;  // segments start on 2 MiB boundaries of the file

struct Segment {
  size_t bytes;
  uint64_t offset;
};

struct Arena {
  std::mutex mutex;
  int fd = -1;  // -1: not created yet; -2: this host has no memfd
  uint64_t inode = 0;
  pid_t owner = 0;
  uint64_t end = 0;                       // the next segment's offset; offsets are never reused
  std::map<uintptr_t, Segment> segments;  // by base address
};

Arena& arena() {
  static auto* instance = new Arena;  // never destroyed: segments may be unmapped during static destruction
  return *instance;
}

// Creates the arena on first use (under the mutex); false when it cannot exist in this process.
bool ready(Arena& a) {
  if (a.fd == -1) {
    a.fd = memfd_create("vnpu-npu-memory", MFD_CLOEXEC);
    struct stat st{};
    if (a.fd >= 0 && fstat(a.fd, &st) == 0) {
      a.inode = st.st_ino;
      a.owner = getpid();
    } else if (a.fd >= 0) {
      close(a.fd);
      a.fd = -2;
    } else {
      a.fd = -2;
    }
  }
  return a.fd >= 0 && a.owner == getpid();  // a forked child maps its own memory privately
}

}  // namespace

void* arena_map(size_t bytes) {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mutex);
  if (!ready(a)) {
    return nullptr;
  }
  const uint64_t offset = a.end;
  const uint64_t end = offset + (bytes + kOffsetAlign - 1) / kOffsetAlign * kOffsetAlign;
  if (ftruncate(a.fd, static_cast<off_t>(end)) != 0) {  // the file is sparse: only touched pages hold memory
    return nullptr;
  }
  void* ptr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, a.fd, static_cast<off_t>(offset));
  if (ptr == MAP_FAILED) {
    return nullptr;
  }
  a.end = end;
  a.segments.emplace(reinterpret_cast<uintptr_t>(ptr), Segment{bytes, offset});
  return ptr;
}

bool arena_unmap(void* ptr, size_t bytes) {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mutex);
  const auto it = a.segments.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == a.segments.end()) {
    return false;
  }
  munmap(ptr, bytes);
  if (a.owner == getpid()) {
    fallocate(a.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(it->second.offset),
              static_cast<off_t>(it->second.bytes));
  }
  a.segments.erase(it);
  return true;
}

bool arena_locate(const void* ptr, size_t bytes, ArenaLocation& where) {
  Arena& a = arena();
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(a.mutex);
  auto it = a.segments.upper_bound(address);
  if (it == a.segments.begin() || a.owner != getpid()) {
    return false;
  }
  --it;
  if (address + bytes > it->first + it->second.bytes) {
    return false;
  }
  where = ArenaLocation{a.fd, a.inode, it->second.offset + (address - it->first)};
  return true;
}

}  // namespace vnpu
