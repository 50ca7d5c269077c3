#include "distributed/EphemeralTimeout.h"

#include <algorithm>

namespace vnpu {

bool EphemeralTimeout::settle() {
  const auto before = active_;
  auto finished = [this](const auto& owner) {
    auto work = owner.first.lock();
    if (work && !work->isCompleted()) {
      return false;
    }
    active_ -= owner.second;
    return true;
  };
  owners_.erase(std::remove_if(owners_.begin(), owners_.end(), finished), owners_.end());
  return active_ != before;
}

void EphemeralTimeout::claim(const c10::intrusive_ptr<c10d::Work>& work) {
  if (unowned_.count() == 0) {
    return;
  }
  owners_.emplace_back(c10::weak_intrusive_ptr<c10d::Work>(work), unowned_);
  unowned_ = std::chrono::milliseconds(0);
}

bool EphemeralTimeout::finished_now() {
  if (unowned_.count() == 0) {
    return false;
  }
  active_ -= unowned_;
  unowned_ = std::chrono::milliseconds(0);
  return true;
}

}  // namespace vnpu
