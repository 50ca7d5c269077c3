// The hccl backend's collectives for the profiler: what each collective moved (kind, group, rank,
// bytes, peer) and when it was issued and completed, for communication.json, communication_matrix.json
// and the HCCL lanes of trace_view.json. Recorded only while a profiling session records device
// activity; the outermost collective of a thread records itself (reduce_scatter runs an allreduce).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace vnpu {

struct CollectiveRecord {
  std::string name;   // torch_npu's HCCL op name: hcom_allReduce__<seq>_0_1
  std::string kind;   // allreduce, broadcast, send, ...
  std::string group;  // the communicator name (ProcessGroupHCCL::comm_name)
  int rank = 0;       // in the group
  int size = 1;
  int peer = -1;  // root (broadcast, reduce, gather, scatter) or peer (send, recv); -1 otherwise
  int device = 0;
  int64_t bytes = 0;  // payload of this rank
  int64_t count = 0;  // elements
  std::string dtype;
  int64_t start_ns = 0;
  std::atomic<int64_t> end_ns{0};
  void finish();  // the first completion sets end_ns
};

void start_collective_recording();
std::vector<std::shared_ptr<CollectiveRecord>> stop_collective_recording();

// Opened at the start of each collective of the hccl backend.
class CollectiveScope {
 public:
  CollectiveScope(const char* kind, const std::string& group, int rank, int size,
                  const std::vector<at::Tensor>& payload, int peer = -1);
  ~CollectiveScope();
  CollectiveScope(const CollectiveScope&) = delete;
  CollectiveScope& operator=(const CollectiveScope&) = delete;
  // The work of the collective, marked so that its completion ends the record.
  c10::intrusive_ptr<c10d::Work> attach(c10::intrusive_ptr<c10d::Work> work);

 private:
  std::shared_ptr<CollectiveRecord> record_;
  bool outermost_;
};

}  // namespace vnpu
