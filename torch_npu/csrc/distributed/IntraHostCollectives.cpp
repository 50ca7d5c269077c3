// The collectives of the intra-host link (IntraHostLink.h), each a walk over its tensors in slot-sized chunks, or,
// for an allreduce, allgather or reduce-scatter, in place on the ranks' npu memory.
// Chunk buffers alternate across chunks and collectives: a rank writes a buffer again only after the meeting
// that every rank reaches once it has finished reading that buffer's previous chunk.
#include "distributed/IntraHostLink.h"

#include "runtime/SegmentArena.h"

#include <algorithm>
#include <cstring>

namespace vnpu {
namespace {

constexpr int64_t kReduceBlockBytes = int64_t{256} << 10;  // reduced and copied out while in the core's cache
// Smaller tensors take the staged walk: a peer range mapped for each of many small tensors costs more than it saves.
constexpr int64_t kInPlaceBytes = int64_t{64} << 10;
constexpr uint64_t kAllgatherCall = 3;
constexpr uint64_t kReduceScatterCall = 4;

// Whether `bytes` at `p` can be read or written while the peers work on `whole`: they are this rank's own part of
// it, or lie outside it. (Over a peer's part they would be overwritten, or read, while that peer works on them.)
bool own_part_or_outside(const uint8_t* p, size_t bytes, const uint8_t* whole, size_t whole_bytes,
                         const uint8_t* own_part) {
  return p == own_part || p + bytes <= whole || p >= whole + whole_bytes;
}

// The elements [lo, hi) of a chunk of n that `rank` reduces: equal parts, each starting on its own cache line.
std::pair<int64_t, int64_t> part_of(int64_t n, int rank, int size, int64_t element_size) {
  const int64_t align = std::max<int64_t>(1, 64 / element_size);
  const int64_t part = ((n + size - 1) / size + align - 1) / align * align;
  const int64_t lo = std::min(n, rank * part);
  return {lo, std::min(n, lo + part)};
}

}  // namespace

template <class Stage, class Between, class After>
void IntraHostLink::walk(const char* collective, uint64_t call, int64_t total, int64_t unit,
                         std::chrono::milliseconds timeout, Stage&& stage, Between&& between, After&& after) {
  const auto deadline = Clock::now() + timeout;
  const int64_t chunk = kSlotBytes / unit;
  start_collective(call, total * unit);
  for (int64_t start = 0; start == 0 || start < total; start += chunk) {  // empty: one round, the ranks still meet
    const int buffer = static_cast<int>(next_buffer_++ & 1);
    const int64_t n = std::min(chunk, total - start);
    stage(start, n, buffer);
    meet(deadline);
    if (start == 0) {
      check_same_call(collective);
    }
    between(start, n, buffer);
    meet(deadline);
    after(start, n, buffer);
  }
}

bool IntraHostLink::meet_in_place(const at::Tensor& target, const char* collective, uint64_t call, uint64_t bytes,
                                  Clock::time_point deadline, uint64_t& parity) {
  if (static_cast<int64_t>(bytes) < kInPlaceBytes || in_place_ < 0) {  // the same on every rank: no meeting
    return false;
  }
  ArenaLocation where{};
  const bool located = target.defined() && arena_locate(target.data_ptr(), target.nbytes(), where);
  if (located) {
    announce_arena(where.fd, where.inode);
  }
  parity = collectives_ & 1;
  start_collective(call, bytes, located ? where.offset + 1 : 0);
  meet(deadline);
  check_same_call(collective);
  for (int r = 0; r < size_; ++r) {
    if (arena_offset(r, parity) == 0) {
      return false;
    }
  }
  if (in_place_ == 0) {
    open_peer_memory(deadline);
  }
  return in_place_ > 0;
}

template <class Body>
bool IntraHostLink::finish_in_place(int kind, Clock::time_point deadline, Body&& body) {
  try {
    body();
  } catch (const c10::Error& error) {
    fail(error.what_without_backtrace());  // the peers are not left waiting at the meeting below
  }
  meet(deadline);
  ++in_place_runs_[kind];
  return true;
}

bool IntraHostLink::allreduce_in_place(const at::Tensor& data, LinkReduce op, uint64_t call,
                                       std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  uint64_t parity = 0;
  if (!meet_in_place(data, "allreduce", call, data.nbytes(), deadline, parity)) {
    return false;
  }
  // Rank r reduces elements [lo, hi) of every rank's tensor, a cache-sized block at a time: the parts in group
  // order into its own tensor, then that result into each peer's.
  const int64_t esize = data.element_size();
  const auto [lo, hi] = part_of(data.numel(), rank_, size_, esize);
  return finish_in_place(0, deadline, [&] {
    std::vector<uint8_t*> tensors(size_);
    for (int r = 0; r < size_; ++r) {
      tensors[r] = r == rank_ ? static_cast<uint8_t*>(data.data_ptr()) + lo * esize
                              : peer_memory_->map(r, arena_offset(r, parity) - 1 + lo * esize,
                                                  static_cast<size_t>((hi - lo) * esize));
    }
    const int64_t block = std::max<int64_t>(1, kReduceBlockBytes / esize);
    std::vector<const uint8_t*> parts(size_);
    for (int64_t at = 0; at < hi - lo; at += block) {
      const int64_t n = std::min(block, hi - lo - at);
      for (int r = 0; r < size_; ++r) {
        parts[r] = tensors[r] + at * esize;
      }
      reduce_into(tensors[rank_] + at * esize, parts, n, data.scalar_type(), op);
      for (int r = 0; r < size_; ++r) {
        if (r != rank_) {
          std::memcpy(tensors[r] + at * esize, tensors[rank_] + at * esize, n * esize);
        }
      }
    }
  });
}

void IntraHostLink::allreduce(const at::Tensor& data, LinkReduce op, std::chrono::milliseconds timeout) {
  const uint64_t call = 1 | static_cast<uint64_t>(op) << 8 | static_cast<uint64_t>(data.scalar_type()) << 16;
  if (allreduce_in_place(data, op, call, timeout)) {
    return;
  }
  // Per chunk, rank r stages every part but its own r, meets, reduces part r reading its own part in place and
  // the peers' from their slots, writes the result to its tensor and to its slot, meets, and copies the peers'
  // finished parts out of their slots.
  const int64_t esize = data.element_size();
  auto* bytes = static_cast<uint8_t*>(data.data_ptr());
  std::vector<const uint8_t*> parts(size_);
  walk(
      "allreduce", call, data.numel(), esize, timeout,
      [&](int64_t start, int64_t n, int buffer) {
        const auto [lo, hi] = part_of(n, rank_, size_, esize);
        uint8_t* here = bytes + start * esize;
        std::memcpy(slot(buffer, rank_), here, lo * esize);
        std::memcpy(slot(buffer, rank_) + hi * esize, here + hi * esize, (n - hi) * esize);
      },
      [&](int64_t start, int64_t n, int buffer) {
        const auto [lo, hi] = part_of(n, rank_, size_, esize);
        uint8_t* mine = bytes + (start + lo) * esize;
        for (int r = 0; r < size_; ++r) {
          parts[r] = r == rank_ ? mine : slot(buffer, r) + lo * esize;
        }
        reduce_into(mine, parts, hi - lo, data.scalar_type(), op);
        std::memcpy(slot(buffer, rank_) + lo * esize, mine, (hi - lo) * esize);
      },
      [&](int64_t start, int64_t n, int buffer) {
        for (int r = 0; r < size_; ++r) {
          const auto [lo, hi] = part_of(n, r, size_, esize);
          if (r != rank_) {
            std::memcpy(bytes + (start + lo) * esize, slot(buffer, r) + lo * esize, (hi - lo) * esize);
          }
        }
      });
}

bool IntraHostLink::reduce_scatter(const at::Tensor& output, const at::Tensor& input, LinkReduce op,
                                   std::chrono::milliseconds timeout) {
  // Rank r reduces part r of every rank's input into its output; nothing is written to a peer.
  const auto deadline = Clock::now() + timeout;
  const int64_t esize = input.element_size();
  const int64_t n = output.numel();
  const auto bytes = static_cast<size_t>(n * esize);
  auto* mine = static_cast<uint8_t*>(input.data_ptr()) + rank_ * bytes;
  auto* out = static_cast<uint8_t*>(output.data_ptr());
  // An output over a peer's part of the input: every rank takes the caller's other way.
  const bool apart = own_part_or_outside(out, bytes, static_cast<uint8_t*>(input.data_ptr()), input.nbytes(), mine);
  const uint64_t call =
      kReduceScatterCall | static_cast<uint64_t>(op) << 8 | static_cast<uint64_t>(input.scalar_type()) << 16;
  uint64_t parity = 0;
  if (!meet_in_place(apart ? input : at::Tensor(), "reduce_scatter", call, input.nbytes(), deadline, parity)) {
    return false;
  }
  return finish_in_place(2, deadline, [&] {
    std::vector<const uint8_t*> parts(size_);
    for (int r = 0; r < size_; ++r) {
      parts[r] = r == rank_ ? mine : peer_memory_->map(r, arena_offset(r, parity) - 1 + rank_ * bytes, bytes);
    }
    reduce_into(out, parts, n, input.scalar_type(), op);
  });
}

void IntraHostLink::broadcast(const at::Tensor& data, int root, std::chrono::milliseconds timeout) {
  auto* bytes = static_cast<uint8_t*>(data.data_ptr());
  walk(
      "broadcast", 2 | static_cast<uint64_t>(root) << 32, data.nbytes(), 1, timeout,
      [&](int64_t start, int64_t n, int buffer) {
        if (rank_ == root) {
          std::memcpy(slot(buffer, root), bytes + start, n);
        }
      },
      [&](int64_t start, int64_t n, int buffer) {
        if (rank_ != root) {
          std::memcpy(bytes + start, slot(buffer, root), n);
        }
      },
      [](int64_t, int64_t, int) {});
}

bool IntraHostLink::allgather_in_place(const at::Tensor& output, const at::Tensor& input,
                                       std::chrono::milliseconds timeout) {
  // Rank r writes its input into part r of every rank's output.
  const auto deadline = Clock::now() + timeout;
  const auto* in = static_cast<const uint8_t*>(input.data_ptr());
  const auto total = static_cast<int64_t>(input.nbytes());
  const auto* own = static_cast<const uint8_t*>(output.data_ptr());
  // An input over a peer's part of the output: every rank takes the staged walk.
  const bool apart = own_part_or_outside(in, total, own, output.nbytes(), own + rank_ * total);
  uint64_t parity = 0;
  if (!meet_in_place(apart ? output : at::Tensor(), "allgather", kAllgatherCall, input.nbytes(), deadline, parity)) {
    return false;
  }
  return finish_in_place(1, deadline, [&] {
    for (int r = 0; r < size_; ++r) {  // memmove: the input may be its own part of the output
      uint8_t* part =
          r == rank_ ? static_cast<uint8_t*>(output.data_ptr()) + rank_ * total
                     : peer_memory_->map(r, arena_offset(r, parity) - 1 + rank_ * total, static_cast<size_t>(total));
      std::memmove(part, in, total);
    }
  });
}

void IntraHostLink::allgather(const at::Tensor& output, const at::Tensor& input, std::chrono::milliseconds timeout) {
  if (allgather_in_place(output, input, timeout)) {
    return;
  }
  const auto* in = static_cast<const uint8_t*>(input.data_ptr());
  auto* out = static_cast<uint8_t*>(output.data_ptr());
  const int64_t total = input.nbytes();
  walk(
      "allgather", kAllgatherCall, total, 1, timeout,
      [&](int64_t start, int64_t n, int buffer) { std::memcpy(slot(buffer, rank_), in + start, n); },
      [&](int64_t start, int64_t n, int buffer) {
        for (int r = 0; r < size_; ++r) {  // from the slots: the input may lie anywhere in the output
          std::memcpy(out + r * total + start, slot(buffer, r), n);
        }
      },
      [](int64_t, int64_t, int) {});
}

}  // namespace vnpu
