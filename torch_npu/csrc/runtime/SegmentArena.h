// The file behind this process's npu segments. Every segment the caching allocator maps lives in one memfd (the
// arena), each at an offset of its own that is never handed out again, so another process of the same user on
// this host can map an npu tensor's memory from (pid, fd, offset) — as the card's IPC memory handles and peer
// access over HCCS let one device read and write another's HBM. The hccl backend's intra-host link reduces its
// peers' tensors in place this way (distributed/PeerMemory.h).
//
// A segment's pages go back to the host when it is unmapped (a hole is punched in the file), only by the process
// that created the arena: a forked child inherits the mappings but never frees its parent's memory.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vnpu {

// Maps `bytes` of readable, writable memory in the arena; nullptr if this host has no memfd (or the mapping is
// refused), in which case the caller maps private memory.
void* arena_map(size_t bytes);

// Unmaps a segment that arena_map returned and releases its pages; false (and nothing done) for other memory.
bool arena_unmap(void* ptr, size_t bytes);

struct ArenaLocation {
  int fd;           // the arena's descriptor in this process
  uint64_t inode;   // the arena file's inode, to tell it apart from whatever another process finds at `fd`
  uint64_t offset;  // where `ptr` is in the file
};

// Where [ptr, ptr + bytes) lives in the arena; false unless it lies inside one segment of it.
bool arena_locate(const void* ptr, size_t bytes, ArenaLocation& where);

}  // namespace vnpu
