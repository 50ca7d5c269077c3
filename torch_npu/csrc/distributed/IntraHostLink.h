// The hccl backend's link between the ranks of one group on one host, as HCCS / PCIe are inside a server: one
// POSIX shared-memory segment holding each rank's records, a futex barrier ("meetings") and, per rank, two
// staging slots of kSlotBytes. A collective walks its tensors in chunks of one slot, double-buffered, two
// meetings per chunk (IntraHostCollectives.cpp); an allreduce is a reduce-scatter and an all-gather per chunk,
// every rank reducing its own 1/size of it at once, in the order of LinkReduce.h.
// An allreduce, allgather or reduce-scatter of at least 64 KiB, when every rank's tensor (allgather: output) lies in
// its segment arena, runs in place instead: each rank maps the peers' npu memory (PeerMemory.h) and reduces its
// 1/size of all the tensors, writing the result into every one of them (allreduce) or its own output
// (reduce-scatter), or writes its input into every output (allgather) — no staging copies, two meetings in all, the
// same order of reduction.
// (Reading the peers' tensors with process_vm_readv was measured too: slower than two memcpys through shared
// memory, since the kernel pins every page it copies.)
//
// Failures: a rank that waits longer than the collective's timeout, or finds a peer process gone, marks the
// segment failed and wakes the others; every later collective on the link fails at once. Ranks passing
// different collectives or sizes are refused by every rank, and the link stays usable.
#pragma once

#include "distributed/LinkReduce.h"
#include "distributed/PeerMemory.h"

#include <ATen/core/Tensor.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace vnpu {

class IntraHostLink {
 public:
  static constexpr int64_t kSlotBytes = int64_t{1} << 21;

  // Creates (the group's rank 0) or opens the named segment; throws when shared memory is not available.
  IntraHostLink(std::string name, int rank, int size, bool create);
  ~IntraHostLink();
  IntraHostLink(const IntraHostLink&) = delete;
  IntraHostLink& operator=(const IntraHostLink&) = delete;

  // Removes the segment's name once every rank has it mapped (the mapping lives until the last rank closes).
  void unlink();

  // The collectives, on contiguous host tensors (npu memory seen through its CPU alias), blocking.
  void allreduce(const at::Tensor& data, LinkReduce op, std::chrono::milliseconds timeout);
  void broadcast(const at::Tensor& data, int root, std::chrono::milliseconds timeout);
  void allgather(const at::Tensor& output, const at::Tensor& input, std::chrono::milliseconds timeout);
  // Part `rank` of every rank's input (size parts of output's size) reduced into `output`, in place on the peers'
  // memory; false, on every rank alike, when that cannot be done (below 64 KiB, an input outside its arena): the
  // caller reduces another way then.
  bool reduce_scatter(const at::Tensor& output, const at::Tensor& input, LinkReduce op,
                      std::chrono::milliseconds timeout);

  // How many allreduces, allgathers and reduce-scatters ran in place on the peers' memory, by collective.
  std::map<std::string, uint64_t> in_place_collectives() const {
    return {{"allreduce", in_place_runs_[0]}, {"allgather", in_place_runs_[1]}, {"reduce_scatter", in_place_runs_[2]}};
  }

 private:
  struct Header;
  using Clock = std::chrono::steady_clock;

  Header* header() const;
  // Every peer's process is visible from here (same PID namespace): only then are dead peers detected.
  bool peers_visible() const;
  // Records what this rank is about to run; after the first meeting every rank compares all the records.
  void start_collective(uint64_t call, uint64_t bytes, uint64_t arena_offset = 0);
  // Starts an in-place collective on `target` (the tensor the peers write): publishes where it is in this rank's
  // arena, meets, checks that the ranks run the same call and tells whether it can run in place — false, on every
  // rank alike, when some rank's target is not in its arena or some rank cannot map its peers' memory (the staged
  // walk runs then). `parity` selects the records of this collective.
  bool meet_in_place(const at::Tensor& target, const char* collective, uint64_t call, uint64_t bytes,
                     Clock::time_point deadline, uint64_t& parity);
  // Runs the in-place work of a collective, then the meeting every rank waits at, and counts it under `kind`
  // (0 allreduce, 1 allgather, 2 reduce_scatter); a peer range the host refuses to map fails the link.
  template <class Body>
  bool finish_in_place(int kind, Clock::time_point deadline, Body&& body);
  bool allreduce_in_place(const at::Tensor& data, LinkReduce op, uint64_t call, std::chrono::milliseconds timeout);
  bool allgather_in_place(const at::Tensor& output, const at::Tensor& input, std::chrono::milliseconds timeout);
  void announce_arena(int fd, uint64_t inode);
  // 1 + the offset in its arena of rank `rank`'s tensor in the collective of `parity`, or 0 if not in one.
  uint64_t arena_offset(int rank, uint64_t parity) const;
  // Once, at the first in-place candidate: every rank opens its peers' arenas, and all learn whether all could.
  void open_peer_memory(Clock::time_point deadline);
  // Walks `total` elements of `unit` bytes a slot at a time, double-buffered: per chunk stage(start, n, buffer), a
  // meeting (the first also compares the ranks' calls), between(...), a meeting, after(...).
  template <class Stage, class Between, class After>
  void walk(const char* collective, uint64_t call, int64_t total, int64_t unit, std::chrono::milliseconds timeout,
            Stage&& stage, Between&& between, After&& after);
  void check_same_call(const char* collective);
  uint8_t* slot(int buffer, int rank) const;
  void meet(Clock::time_point deadline);
  [[noreturn]] void fail(const std::string& why);
  void check_usable() const;
  std::vector<int> missing_peers() const;
  std::string gone_peers() const;

  std::string name_;
  int rank_;
  int size_;
  size_t bytes_ = 0;
  void* base_ = nullptr;
  uint64_t meetings_ = 0;
  uint64_t next_buffer_ = 0;  // alternates across chunks and collectives alike
  uint64_t collectives_ = 0;
  int spins_ = 0;
  bool unlinked_ = false;
  bool peers_checked_ = false;
  bool peers_visible_ = false;
  int in_place_ = 0;  // 0: not tried yet; 1: every rank maps its peers' memory; -1: some rank cannot
  std::unique_ptr<PeerMemory> peer_memory_;
  std::array<uint64_t, 3> in_place_runs_{};  // allreduce, allgather, reduce_scatter
};

}  // namespace vnpu
