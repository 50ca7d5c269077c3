// The collectives of the intra-host link (IntraHostLink.h), each a walk over its tensors in slot-sized chunks.
// Chunk buffers alternate across chunks and collectives: a rank writes a buffer again only after the meeting
// that every rank reaches once it has finished reading that buffer's previous chunk.
#include "distributed/IntraHostLink.h"

#include <algorithm>
#include <cstring>

namespace vnpu {
namespace {

// The elements [lo, hi) of a chunk of n that `rank` reduces: equal parts, each starting on its own cache line.
std::pair<int64_t, int64_t> part_of(int64_t n, int rank, int size, int64_t element_size) {
  const int64_t align = std::max<int64_t>(1, 64 / element_size);
  const int64_t part = ((n + size - 1) / size + align - 1) / align * align;
  const int64_t lo = std::min(n, rank * part);
  return {lo, std::min(n, lo + part)};
}

}  // namespace

void IntraHostLink::allreduce(const at::Tensor& data, LinkReduce op, std::chrono::milliseconds timeout) {
  // Per chunk, rank r stages every part but its own r, meets, reduces part r reading its own part in place and
  // the peers' from their slots, writes the result to its tensor and to its slot, meets, and copies the peers'
  // finished parts out of their slots.
  const auto deadline = Clock::now() + timeout;
  start_collective(1 | static_cast<uint64_t>(op) << 8 | static_cast<uint64_t>(data.scalar_type()) << 16, data.nbytes());
  const int64_t esize = data.element_size();
  const int64_t chunk = kSlotBytes / esize;
  auto* bytes = static_cast<uint8_t*>(data.data_ptr());
  std::vector<const uint8_t*> parts(size_);
  for (int64_t start = 0; start == 0 || start < data.numel(); start += chunk) {  // empty: one meeting
    const int buffer = static_cast<int>(next_buffer_++ & 1);
    const int64_t n = std::min(chunk, data.numel() - start);
    uint8_t* here = bytes + start * esize;
    uint8_t* staged = slot(buffer, rank_);
    const auto [lo, hi] = part_of(n, rank_, size_, esize);
    std::memcpy(staged, here, lo * esize);
    std::memcpy(staged + hi * esize, here + hi * esize, (n - hi) * esize);
    meet(deadline);
    if (start == 0) {
      check_same_call("allreduce");
    }
    for (int r = 0; r < size_; ++r) {
      parts[r] = (r == rank_ ? here : slot(buffer, r)) + lo * esize;
    }
    reduce_into(here + lo * esize, parts, hi - lo, data.scalar_type(), op);
    std::memcpy(staged + lo * esize, here + lo * esize, (hi - lo) * esize);
    meet(deadline);
    for (int r = 0; r < size_; ++r) {
      const auto [their_lo, their_hi] = part_of(n, r, size_, esize);
      if (r != rank_) {
        std::memcpy(here + their_lo * esize, slot(buffer, r) + their_lo * esize, (their_hi - their_lo) * esize);
      }
    }
  }
}

void IntraHostLink::broadcast(const at::Tensor& data, int root, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  auto* bytes = static_cast<uint8_t*>(data.data_ptr());
  const int64_t total = data.nbytes();
  start_collective(2 | static_cast<uint64_t>(root) << 32, total);
  for (int64_t start = 0; start == 0 || start < total; start += kSlotBytes) {
    const int buffer = static_cast<int>(next_buffer_++ & 1);
    const int64_t n = std::min(kSlotBytes, total - start);
    if (rank_ == root) {
      std::memcpy(slot(buffer, root), bytes + start, n);
    }
    meet(deadline);
    if (start == 0) {
      check_same_call("broadcast");
    }
    if (rank_ != root) {
      std::memcpy(bytes + start, slot(buffer, root), n);
    }
    meet(deadline);
  }
}

void IntraHostLink::allgather(const at::Tensor& output, const at::Tensor& input, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const auto* in = static_cast<const uint8_t*>(input.data_ptr());
  auto* out = static_cast<uint8_t*>(output.data_ptr());
  const int64_t total = input.nbytes();
  start_collective(3, total);
  for (int64_t start = 0; start == 0 || start < total; start += kSlotBytes) {
    const int buffer = static_cast<int>(next_buffer_++ & 1);
    const int64_t n = std::min(kSlotBytes, total - start);
    std::memcpy(slot(buffer, rank_), in + start, n);
    meet(deadline);
    if (start == 0) {
      check_same_call("allgather");
    }
    for (int r = 0; r < size_; ++r) {
      std::memmove(out + r * total + start, r == rank_ ? in + start : slot(buffer, r),
                   n);  // the input may be its own part of the output
    }
    meet(deadline);
  }
}

}  // namespace vnpu
