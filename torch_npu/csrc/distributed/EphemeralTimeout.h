#pragma once

// An ephemeral timeout extension of a group (torch's _add_ephemeral_timeout_for_all_pgs, torch_npu's
// _hccl_add_ephemeral_timeout_for_all_pgs): added to the timeout of every collective issued from the call on,
// until the first collective issued after the call has finished; then the group's timeout is its own again.
//
// A transport collective's timeout is fixed when it is issued, so the extension expires lazily: before the next
// collective is issued, the extension whose collective has finished by then is removed.

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <utility>
#include <vector>

namespace vnpu {

class EphemeralTimeout {
 public:
  void add(std::chrono::milliseconds extra) {
    active_ += extra;
    unowned_ += extra;
  }
  std::chrono::milliseconds active() const {
    return active_;
  }
  // Before a collective is issued: removes the extensions whose collectives finished. True when one did.
  bool settle();
  // After `work` was issued: it owns the extension added since the last collective was issued.
  void claim(const c10::intrusive_ptr<c10d::Work>& work);
  // After a collective that finished before it returned: the extension it would own expires at once.
  bool finished_now();

 private:
  std::chrono::milliseconds active_{0};
  std::chrono::milliseconds unowned_{0};
  // A collective no one holds any more has finished (the transport holds the ones it still runs).
  std::vector<std::pair<c10::weak_intrusive_ptr<c10d::Work>, std::chrono::milliseconds>> owners_;
};

}  // namespace vnpu
