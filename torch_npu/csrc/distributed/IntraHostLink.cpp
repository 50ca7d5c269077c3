#include "distributed/IntraHostLink.h"

#include <c10/util/Exception.h>
#include <c10/util/StringUtil.h>

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace vnpu {

namespace {

constexpr uint64_t kMagic = 0x766e70755f6c6e6bULL;  // "vnpu_lnk"
// Polls of the barrier word before sleeping on it: with a core per rank, long enough to catch a peer a few
// microseconds behind; with more ranks than cores, short, since spinning then takes the core a peer needs.
constexpr int kSpinsOwnCore = 4000;
constexpr int kSpinsSharedCore = 50;
constexpr auto kSleep = std::chrono::milliseconds(10);
constexpr auto kPeerCheckEvery = std::chrono::milliseconds(100);

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::milliseconds at_most) {
  timespec ts{static_cast<time_t>(at_most.count() / 1000), static_cast<long>((at_most.count() % 1000) * 1000000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// A process that has exited (or is a zombie nobody reaped yet) takes no further part.
bool process_gone(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) {
    return true;
  }
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && (line[close + 2] == 'Z' || line[close + 2] == 'X');
}

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) {
    text += (text.empty() ? "" : ", ") + std::to_string(r);
  }
  return text;
}

}  // namespace

struct IntraHostLink::Header {
  uint64_t magic;
  int64_t size;
  alignas(64) std::atomic<uint32_t> arrived;
  alignas(64) std::atomic<uint32_t> generation;
  alignas(64) std::atomic<uint32_t> failed_by;  // 0, or 1 + the rank that abandoned the link
  struct alignas(64) Peer {
    std::atomic<uint64_t> meetings;  // how many meetings the rank has arrived at
    int32_t pid;
    // What the rank's last two collectives are (kind | reduction | dtype | root; bytes; 1 + the offset of an
    // allreduce's tensor in the rank's segment arena, or 0), by collective parity: a rank can be at most one
    // collective ahead of the slowest while that one still reads them.
    uint64_t call[2][3];
    int32_t arena_fd;  // the rank's segment arena (runtime/SegmentArena.h), once it has one
    uint64_t arena_inode;
    std::atomic<int32_t> opened_peers;  // 1: the rank mapped every peer's arena; 2: it could not
  };
  Peer peers[1];  // size of them
};

IntraHostLink::Header* IntraHostLink::header() const {
  return static_cast<Header*>(base_);
}

uint8_t* IntraHostLink::slot(int buffer, int rank) const {
  const size_t head = round_up(sizeof(Header) + sizeof(Header::Peer) * size_, 4096);
  return static_cast<uint8_t*>(base_) + head + (static_cast<size_t>(buffer) * size_ + rank) * kSlotBytes;
}

IntraHostLink::IntraHostLink(std::string name, int rank, int size, bool create)
    : name_(std::move(name)), rank_(rank), size_(size) {
  bytes_ = round_up(sizeof(Header) + sizeof(Header::Peer) * size, 4096) + 2 * static_cast<size_t>(size) * kSlotBytes;
  const int fd = shm_open(name_.c_str(), create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
  TORCH_CHECK(fd >= 0, "shm_open(", name_, "): ", std::strerror(errno));
  if (create) {
    // Reserve the pages now: a full /dev/shm must fail here, not with SIGBUS in the middle of a collective.
    const int reserved = ftruncate(fd, static_cast<off_t>(bytes_)) == 0 ? posix_fallocate(fd, 0, bytes_) : errno;
    if (reserved != 0) {
      close(fd);
      shm_unlink(name_.c_str());
      TORCH_CHECK(false, "cannot reserve ", bytes_, " bytes of shared memory: ", std::strerror(reserved));
    }
  } else {
    struct stat st{};
    if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes_) {
      close(fd);
      TORCH_CHECK(false, "shared memory segment ", name_, " has an unexpected size");
    }
  }
  base_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    if (create) {
      shm_unlink(name_.c_str());
    }
    TORCH_CHECK(false, "mmap of ", bytes_, " bytes of shared memory: ", std::strerror(errno));
  }
  Header* h = header();
  if (create) {  // the pages are zero: the atomics start at 0
    h->size = size;
    h->magic = kMagic;
  } else if (h->magic != kMagic || h->size != size) {
    munmap(base_, bytes_);
    base_ = nullptr;
    TORCH_CHECK(false, "shared memory segment ", name_, " belongs to another group");
  }
  h->peers[rank_].pid = static_cast<int32_t>(getpid());
  spins_ = size_ <= sysconf(_SC_NPROCESSORS_ONLN) ? kSpinsOwnCore : kSpinsSharedCore;
}

IntraHostLink::~IntraHostLink() {
  if (base_ != nullptr) {
    munmap(base_, bytes_);
  }
  if (rank_ == 0 && !unlinked_) {
    shm_unlink(name_.c_str());
  }
}

void IntraHostLink::unlink() {
  if (!unlinked_) {
    shm_unlink(name_.c_str());
    unlinked_ = true;
  }
}

bool IntraHostLink::peers_visible() const {
  for (int r = 0; r < size_; ++r) {
    const int pid = header()->peers[r].pid;
    if (pid <= 0 || (kill(pid, 0) != 0 && errno != EPERM)) {
      return false;
    }
  }
  return true;
}

std::vector<int> IntraHostLink::missing_peers() const {
  std::vector<int> missing;
  for (int r = 0; r < size_; ++r) {
    if (header()->peers[r].meetings.load(std::memory_order_relaxed) < meetings_) {
      missing.push_back(r);
    }
  }
  return missing;
}

std::string IntraHostLink::gone_peers() const {
  std::string gone;
  for (int r = 0; r < size_; ++r) {
    const int pid = header()->peers[r].pid;
    if (r != rank_ && process_gone(pid)) {
      gone += c10::str(gone.empty() ? "" : ", ", "rank ", r, " (pid ", pid, ")");
    }
  }
  return gone;
}

void IntraHostLink::fail(const std::string& why) {
  uint32_t none = 0;
  header()->failed_by.compare_exchange_strong(none, static_cast<uint32_t>(rank_ + 1));
  futex_wake(&header()->generation);
  throw std::runtime_error(why);
}

void IntraHostLink::check_usable() const {
  const uint32_t by = header()->failed_by.load(std::memory_order_acquire);
  if (by != 0) {
    throw std::runtime_error(c10::str("the group's intra-host link was abandoned by rank ", by - 1,
                                      " (a timeout or a lost peer); the group cannot run collectives any more"));
  }
}

void IntraHostLink::meet(Clock::time_point deadline) {
  Header* h = header();
  const uint32_t generation = h->generation.load(std::memory_order_acquire);
  h->peers[rank_].meetings.store(++meetings_, std::memory_order_relaxed);
  if (h->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint32_t>(size_)) {
    h->arrived.store(0, std::memory_order_relaxed);
    h->generation.store(generation + 1, std::memory_order_release);
    futex_wake(&h->generation);
    return;
  }
  auto next_peer_check = Clock::now() + kPeerCheckEvery;
  for (int spin = 0; h->generation.load(std::memory_order_acquire) == generation; ++spin) {
    if (spin < spins_) {
      cpu_relax();
      continue;
    }
    check_usable();
    futex_wait(&h->generation, generation, kSleep);
    const auto now = Clock::now();
    if (now >= deadline) {
      fail(c10::str("timed out waiting for rank(s) ", rank_list(missing_peers()),
                    " of the group at the intra-host link (the collective's timeout; HCCL_EXEC_TIMEOUT sets it)"));
    }
    if (now >= next_peer_check) {
      if (peers_visible_) {
        const std::string gone = gone_peers();
        if (!gone.empty()) {
          fail(c10::str("the process of ", gone, " exited; the collective cannot complete"));
        }
      }
      next_peer_check = now + kPeerCheckEvery;
    }
  }
}

void IntraHostLink::start_collective(uint64_t call, uint64_t bytes, uint64_t arena_offset) {
  check_usable();
  auto& mine = header()->peers[rank_].call[collectives_ & 1];
  mine[0] = call;
  mine[1] = bytes;
  mine[2] = arena_offset;
  // By the first collective every rank has mapped the segment and written its pid. Peers in another PID
  // namespace cannot be watched: their loss is left to the timeout.
  if (!peers_checked_) {
    peers_visible_ = peers_visible();
    peers_checked_ = true;
  }
}

void IntraHostLink::check_same_call(const char* collective) {
  const uint64_t parity = collectives_++ & 1;
  const auto& mine = header()->peers[rank_].call[parity];
  for (int r = 0; r < size_; ++r) {
    const auto& theirs = header()->peers[r].call[parity];
    if (theirs[0] != mine[0] || theirs[1] != mine[1]) {
      // Every rank sees the same records after the first meeting, so every rank refuses this collective.
      throw std::runtime_error(c10::str(collective, " differs between ranks: rank ", rank_, " passes ", mine[1],
                                        " bytes (call ", mine[0], "), rank ", r, " passes ", theirs[1], " bytes (call ",
                                        theirs[0], ")"));
    }
  }
}

void IntraHostLink::announce_arena(int fd, uint64_t inode) {
  header()->peers[rank_].arena_fd = fd;
  header()->peers[rank_].arena_inode = inode;
}

uint64_t IntraHostLink::arena_offset(int rank, uint64_t parity) const {
  return header()->peers[rank].call[parity][2];
}

void IntraHostLink::open_peer_memory(Clock::time_point deadline) {
  std::vector<PeerArena> arenas(size_);
  for (int r = 0; r < size_; ++r) {
    const Header::Peer& peer = header()->peers[r];
    arenas[r] = PeerArena{peer.pid, peer.arena_fd, peer.arena_inode};
  }
  auto memory = std::make_unique<PeerMemory>();
  // Peers in another PID namespace have other numbers under /proc here.
  const bool opened = peers_visible_ && memory->open(rank_, arenas);
  header()->peers[rank_].opened_peers.store(opened ? 1 : 2, std::memory_order_relaxed);
  meet(deadline);
  bool everyone = true;
  for (int r = 0; r < size_; ++r) {
    everyone = everyone && header()->peers[r].opened_peers.load(std::memory_order_relaxed) == 1;
  }
  in_place_ = everyone ? 1 : -1;
  if (everyone) {
    peer_memory_ = std::move(memory);
  }
}

}  // namespace vnpu
