#include "plan/PlanValues.h"

#include <mutex>
#include <unordered_set>

namespace vnpu {
namespace {

struct Values {
  std::mutex mu;
  std::unordered_set<int64_t> storages;  // data pointers of npu storages that hold values
};
Values& values() {
  static auto* v = new Values();
  return *v;
}

int64_t key(const at::Tensor& t) {
  return reinterpret_cast<int64_t>(t.storage().data());
}

}  // namespace

bool plan_can_hold_values(const at::Tensor& t) {
  return t.defined() && t.has_storage() && t.storage_offset() == 0 && t.is_contiguous() &&
         t.nbytes() == t.storage().nbytes() && t.nbytes() <= kPlanValueBytes && t.storage().data() != nullptr;
}

void plan_values_written(const at::Tensor& t) {
  auto& v = values();
  std::lock_guard<std::mutex> lock(v.mu);
  v.storages.insert(key(t));
}

void plan_values_lost(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) {
    return;
  }
  auto& v = values();
  std::lock_guard<std::mutex> lock(v.mu);
  v.storages.erase(key(t));
}

void plan_values_freed(int64_t ptr) {
  auto& v = values();
  std::lock_guard<std::mutex> lock(v.mu);
  v.storages.erase(ptr);
}

bool plan_has_values(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) {
    return false;
  }
  auto& v = values();
  std::lock_guard<std::mutex> lock(v.mu);
  return v.storages.count(key(t)) > 0;
}

}  // namespace vnpu
