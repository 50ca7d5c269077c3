#include "profiler/CollectiveRecorder.h"

#include "distributed/HcclWork.h"
#include "runtime/Device.h"
#include "runtime/Stream.h"

#include <c10/util/StringUtil.h>

#include <map>
#include <mutex>

namespace vnpu {
namespace {

std::atomic<bool> g_recording{false};
std::mutex g_mu;
std::vector<std::shared_ptr<CollectiveRecord>> g_records;
std::map<std::string, int64_t> g_sequence;  // per group, as HCCL numbers its ops
thread_local int t_depth = 0;

// HCCL's operator names ("hcom_allReduce_"), by collective.
const char* hccl_name(const std::string& kind) {
  static const std::map<std::string, const char*> names = {
      {"allreduce", "allReduce"},
      {"broadcast", "broadcast"},
      {"reduce", "reduce"},
      {"allgather", "allGather"},
      {"gather", "gather"},
      {"scatter", "scatter"},
      {"reduce_scatter", "reduceScatter"},
      {"all_to_all", "alltoallv"},
      {"send", "send"},
      {"recv", "receive"},
      {"barrier", "barrier"},
  };
  const auto found = names.find(kind);
  return found == names.end() ? "unknown" : found->second;
}

}  // namespace

void CollectiveRecord::finish() {
  int64_t unset = 0;
  end_ns.compare_exchange_strong(unset, now_ns());
}

void start_collective_recording() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_records.clear();
  g_sequence.clear();
  g_recording = true;
}

std::vector<std::shared_ptr<CollectiveRecord>> stop_collective_recording() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_recording = false;
  std::vector<std::shared_ptr<CollectiveRecord>> out;
  out.swap(g_records);
  return out;
}

CollectiveScope::CollectiveScope(const char* kind, const std::string& group, int rank, int size,
                                 const std::vector<at::Tensor>& payload, int peer)
    : outermost_(t_depth++ == 0) {
  if (!outermost_ || !g_recording.load(std::memory_order_relaxed)) {
    return;
  }
  record_ = std::make_shared<CollectiveRecord>();
  record_->kind = kind;
  record_->group = group;
  record_->rank = rank;
  record_->size = size;
  record_->peer = peer;
  record_->device = static_cast<int>(current_device());
  for (const auto& t : payload) {
    record_->bytes += static_cast<int64_t>(t.nbytes());
    record_->count += t.numel();
  }
  record_->dtype = payload.empty() ? "" : c10::toString(payload[0].scalar_type());
  record_->start_ns = now_ns();
  std::lock_guard<std::mutex> lock(g_mu);
  const int64_t seq = g_sequence[group]++;
  record_->name = c10::str("hcom_", hccl_name(kind), "__", seq, "_0_1");
  g_records.push_back(record_);
}

CollectiveScope::~CollectiveScope() {
  --t_depth;
}

c10::intrusive_ptr<c10d::Work> CollectiveScope::attach(c10::intrusive_ptr<c10d::Work> work) {
  if (record_) {
    if (auto* hccl = dynamic_cast<HcclWork*>(work.get())) {
      hccl->set_record(record_);
    }
  }
  return work;
}

}  // namespace vnpu
