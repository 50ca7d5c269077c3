#include "distributed/PeerMemory.h"

#include <c10/util/Exception.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace vnpu {

PeerMemory::~PeerMemory() {
  for (const Range& range : ranges_) {
    munmap(range.address, range.length);
  }
  for (int fd : fds_) {
    if (fd >= 0) {
      close(fd);
    }
  }
}

bool PeerMemory::open(int rank, const std::vector<PeerArena>& arenas) {
  fds_.assign(arenas.size(), -1);
  for (size_t r = 0; r < arenas.size(); ++r) {
    if (static_cast<int>(r) == rank) {
      continue;
    }
    const std::string path = "/proc/" + std::to_string(arenas[r].pid) + "/fd/" + std::to_string(arenas[r].fd);
    fds_[r] = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    struct stat st{};
    if (fds_[r] < 0 || fstat(fds_[r], &st) != 0 || st.st_ino != arenas[r].inode) {
      return false;  // the destructor closes what was opened
    }
  }
  return true;
}

uint8_t* PeerMemory::map(int rank, uint64_t offset, size_t bytes) {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  const size_t length = (offset + bytes + page - 1) / page * page - start;
  ++clock_;
  for (Range& range : ranges_) {
    if (range.rank == rank && range.start <= start && start + length <= range.start + range.length) {
      range.used = clock_;
      return range.address + (offset - range.start);
    }
  }
  if (ranges_.size() == kKeptRanges) {
    const auto oldest = std::min_element(ranges_.begin(), ranges_.end(),
                                         [](const Range& a, const Range& b) { return a.used < b.used; });
    munmap(oldest->address, oldest->length);
    ranges_.erase(oldest);
  }
  // MAP_POPULATE: the peer's pages are in its file already; one call maps them all instead of a fault per page.
  void* address =
      mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fds_[rank], static_cast<off_t>(start));
  TORCH_CHECK(address != MAP_FAILED, "the intra-host link cannot map ", length, " bytes of rank ", rank,
              "'s npu memory: ", std::strerror(errno));
  ranges_.push_back(Range{rank, start, length, static_cast<uint8_t*>(address), clock_});
  return static_cast<uint8_t*>(address) + (offset - start);
}

}  // namespace vnpu
