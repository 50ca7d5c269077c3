#include "runtime/OomObservers.h"

#include <mutex>
#include <vector>

namespace vnpu {
namespace {

struct Observers {
  std::mutex mu;
  std::vector<OomObserver> list;
};

Observers& observers() {
  static auto* o = new Observers();  // outlives static destruction: allocations may fail during it
  return *o;
}

}  // namespace

void attach_oom_observer(OomObserver observer) {
  auto& o = observers();
  std::lock_guard<std::mutex> lock(o.mu);
  o.list.push_back(std::move(observer));
}

void notify_oom_observers(int64_t device, int64_t alloc, int64_t device_total, int64_t device_free) {
  std::vector<OomObserver> local;
  {
    auto& o = observers();
    std::lock_guard<std::mutex> lock(o.mu);
    local = o.list;
  }
  for (const auto& observer : local) {
    observer(device, alloc, device_total, device_free);
  }
}

}  // namespace vnpu
