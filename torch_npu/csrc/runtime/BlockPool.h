// Data structures of the caching allocator: blocks of device memory and the free lists that
// find the best-fitting cached block. Not thread-safe: the allocator holds its device lock.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/SmallVector.h>
#include <c10/util/llvmMathExtras.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

namespace vnpu {

constexpr size_t kMinBlockSize = 512;             // every block is a multiple of 512 bytes
constexpr size_t kSmallSize = size_t(1) << 20;    // small pool holds blocks up to 1 MiB
constexpr size_t kSmallBuffer = size_t(2) << 20;  // small blocks are packed in 2 MiB segments

struct Block {
  char* ptr = nullptr;
  size_t size = 0;
  size_t requested = 0;
  c10::DeviceIndex device = 0;
  bool small = false;
  bool allocated = false;
  Block* prev = nullptr;  // neighbours in the same segment
  Block* next = nullptr;
  Block* free_prev = nullptr;  // links in a small-pool free list
  Block* free_next = nullptr;
  // torch_npu storage description of the tensor memory in this block (npu_format_cast).
  uint64_t pool = 0;           // 0: the default pool, else a torch.npu.MemPool id
  bool pluggable = false;      // memory of a user NPUPluggableAllocator, outside the pools
  int32_t npu_format = -1;     // -1: the default format for the tensor's rank
  int64_t storage_numel = -1;  // elements of the physical (possibly padded) storage
  // the sizes and dtype of the tensor the storage was made for (torch_npu's base_sizes_ / data_type_),
  // kept for storages given a private format; Undefined: none kept
  c10::ScalarType base_dtype = c10::ScalarType::Undefined;
  c10::SmallVector<int64_t, 5> base_sizes;
  bool is_split() const {
    return prev != nullptr || next != nullptr;
  }
  // Makes a recycled record what `new Block()` with these four fields would be, field by field (assigning a
  // fresh Block would go through base_sizes' copy); keep it in step with the members above.
  void reset(char* p, size_t s, c10::DeviceIndex d, bool sm) {
    ptr = p;
    size = s;
    requested = 0;
    device = d;
    small = sm;
    allocated = false;
    prev = next = free_prev = free_next = nullptr;
    pool = 0;
    pluggable = false;
    npu_format = -1;
    storage_numel = -1;
    base_dtype = c10::ScalarType::Undefined;
    base_sizes.clear();
  }
};

// Recycles Block records so splitting and merging never call the heap.
class BlockRecords {
 public:
  Block* make(char* ptr, size_t size, c10::DeviceIndex device, bool small) {
    Block* b;
    if (spare_.empty()) {
      b = new Block();
    } else {
      b = spare_.back();
      spare_.pop_back();
    }
    b->reset(ptr, size, device, small);
    return b;
  }
  void recycle(Block* b) {
    spare_.push_back(b);
  }

 private:
  std::vector<Block*> spare_;
};

// Free small blocks (<= 2 MiB, multiples of 512) in one list per size, with a bitmap of the
// non-empty sizes and a summary bitmap of its non-zero words: finding the smallest block that fits
// is at most three bit scans (a small request next to a segment's large remainder would otherwise
// walk the 65 words between them on every allocation), and no node is allocated when blocks enter
// or leave the lists.
class SmallFreeLists {
 public:
  static constexpr size_t kClasses = kSmallBuffer / kMinBlockSize + 1;

  void insert(Block* b) {
    const size_t c = b->size / kMinBlockSize;
    b->free_prev = nullptr;
    b->free_next = head_[c];
    if (head_[c] != nullptr) {
      head_[c]->free_prev = b;
    }
    head_[c] = b;
    bits_[c / 64] |= uint64_t(1) << (c % 64);
    summary_[c / 64 / 64] |= uint64_t(1) << (c / 64 % 64);
    ++count_;
  }
  void erase(Block* b) {
    const size_t c = b->size / kMinBlockSize;
    if (b->free_prev != nullptr) {
      b->free_prev->free_next = b->free_next;
    } else {
      head_[c] = b->free_next;
    }
    if (b->free_next != nullptr) {
      b->free_next->free_prev = b->free_prev;
    }
    if (head_[c] == nullptr) {
      bits_[c / 64] &= ~(uint64_t(1) << (c % 64));
      if (bits_[c / 64] == 0) {
        summary_[c / 64 / 64] &= ~(uint64_t(1) << (c / 64 % 64));
      }
    }
    b->free_prev = b->free_next = nullptr;
    --count_;
  }
  // The most recently freed block of the smallest size >= `size`, or null.
  Block* best(size_t size) const {
    size_t c = (size + kMinBlockSize - 1) / kMinBlockSize;
    size_t word = c / 64;
    if (word >= bits_.size()) {
      return nullptr;
    }
    uint64_t w = bits_[word] & (~uint64_t(0) << (c % 64));
    if (w == 0) {
      word = next_word_after(word);
      if (word >= bits_.size()) {
        return nullptr;
      }
      w = bits_[word];
    }
    return head_[word * 64 + static_cast<size_t>(c10::llvm::countTrailingZeros(w))];
  }
  template <class F>
  void for_each(F&& f) const {
    for (size_t c = 0; c < kClasses; ++c) {
      for (Block* b = head_[c]; b != nullptr;) {
        Block* next = b->free_next;  // f may erase b
        f(b);
        b = next;
      }
    }
  }
  size_t size() const {
    return count_;
  }

 private:
  static constexpr size_t kWords = (kClasses + 63) / 64;

  // The first non-zero word of bits_ after `word`, or kWords.
  size_t next_word_after(size_t word) const {
    size_t s = (word + 1) / 64;
    if (s >= summary_.size()) {
      return kWords;
    }
    uint64_t bits = summary_[s] & (~uint64_t(0) << ((word + 1) % 64));
    while (bits == 0) {
      if (++s >= summary_.size()) {
        return kWords;
      }
      bits = summary_[s];
    }
    return s * 64 + static_cast<size_t>(c10::llvm::countTrailingZeros(bits));
  }

  std::array<Block*, kClasses> head_{};
  std::array<uint64_t, kWords> bits_{};
  std::array<uint64_t, (kWords + 63) / 64> summary_{};
  size_t count_ = 0;
};

struct BlockLess {
  bool operator()(const Block* a, const Block* b) const {
    return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
  }
};

// Free large blocks, ordered by (size, address) for best fit.
class LargeFreeSet {
 public:
  void insert(Block* b) {
    set_.insert(b);
  }
  void erase(Block* b) {
    set_.erase(b);
  }
  Block* best(size_t size) const {
    Block key;
    key.size = size;
    auto it = set_.lower_bound(&key);
    return it == set_.end() ? nullptr : *it;
  }
  template <class F>
  void for_each(F&& f) const {
    for (auto it = set_.begin(); it != set_.end();) {
      Block* b = *it++;  // f may erase b
      f(b);
    }
  }

 private:
  std::set<Block*, BlockLess> set_;
};

// A test-and-test-and-set lock: uncontended it costs one atomic exchange, cheaper than a
// pthread mutex on the per-operator allocation path; contended it yields the CPU.
class SpinLock {
 public:
  void lock() {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      int spins = 0;
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins > 64) {
          std::this_thread::yield();
          spins = 0;
        }
      }
    }
  }
  void unlock() {
    locked_.store(false, std::memory_order_release);
  }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace vnpu
