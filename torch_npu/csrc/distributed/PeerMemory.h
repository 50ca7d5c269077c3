// The npu memory of the other ranks of an intra-host link, mapped into this process: each peer's segment arena
// (runtime/SegmentArena.h) opened once through /proc/<pid>/fd, and the ranges a collective touches mapped and
// kept for the next collectives on the same tensors (a training loop reduces the same gradient buckets every
// step). A peer's freed segment leaves a kept range mapping a hole of its file: no memory, and its offset is
// never handed out again, so a kept range never shows another tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vnpu {

struct PeerArena {
  int pid;
  int fd;  // in the peer's process
  uint64_t inode;
};

class PeerMemory {
 public:
  PeerMemory() = default;
  ~PeerMemory();
  PeerMemory(const PeerMemory&) = delete;
  PeerMemory& operator=(const PeerMemory&) = delete;

  // Opens every arena but `rank`'s own; false if one cannot be opened or is not the file its rank announced.
  bool open(int rank, const std::vector<PeerArena>& arenas);
  // Where `bytes` at `offset` of peer `rank`'s arena are in this process; throws when the host refuses to map them.
  uint8_t* map(int rank, uint64_t offset, size_t bytes);

 private:
  struct Range {
    int rank;
    uint64_t start;  // page-aligned file offset
    size_t length;
    uint8_t* address;
    uint64_t used;  // when last returned, for evicting the least recently used
  };
  static constexpr size_t kKeptRanges = 32;

  std::vector<int> fds_;
  std::vector<Range> ranges_;
  uint64_t clock_ = 0;
};

}  // namespace vnpu
