// NPU graphs (torch.npu.NPUGraph): capture records the operators issued on the capturing thread's
// capture stream; replay runs the same operators again on the same tensors, writing results into
// the captured outputs' memory, so code that reads the captured outputs sees new values.
//
// Capture executes the operators too (their results are valid afterwards, like a first replay).
// Operations that need the host to read device memory (.item(), copies to the CPU, nonzero...)
// are refused while capturing, as on Ascend.
//
// Kernels that do not go through the dispatcher (inductor's compiled C++ kernels) join the graph
// as host kernels: record_host_kernel() appends one in issue order, and replay calls it again. A host
// kernel names the tensors it reads and writes; the graph keeps them as it keeps an operator's (the ones
// in its pool by address) and hands them to the kernel at each replay.
#pragma once

#include "aten/OpHooks.h"

#include <c10/core/Stream.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace vnpu {

// A kernel run on the host: called with the tensors it reads and the tensors it writes.
using HostKernel = std::function<void(const std::vector<c10::IValue>& reads, const std::vector<c10::IValue>& writes)>;

class GraphRecording final : public OpHook, public std::enable_shared_from_this<GraphRecording> {
 public:
  void begin(c10::Stream stream);
  void end();
  void replay();
  void reset();
  size_t size() const {
    return records_.size();
  }
  bool capturing() const {
    return capturing_;
  }
  // Capturing, on this thread, with the capture stream current.
  bool captures_current_stream() const;
  // One line per recorded operator: its name and argument shapes.
  std::vector<std::string> describe() const;
  // Replaces a recorded operator's non-tensor argument (for torch_npu's graph update API).
  void update_argument(size_t record, const std::string& name, const c10::IValue& value);
  std::vector<size_t> records_of(const std::string& op_name) const;
  // Replaces records [start, end) with another recording's records (graph task updates).
  void splice(size_t start, size_t end, const GraphRecording& replacement);
  // Replaces tasks [start, end) by the replacement's, which may be more or fewer (an operator issued again
  // with new arguments whose composition takes another path); later task indices shift.
  void replace(size_t start, size_t end, const GraphRecording& replacement);

  void before(const c10::OperatorHandle& op, const OpFacts& facts, const std::vector<c10::IValue>& inputs) override;
  void after(const OpCall& call) override;
  // Appends a host kernel when this graph captures the current stream of this thread.
  bool add_host_kernel(const std::string& name, HostKernel kernel, std::vector<c10::IValue> reads,
                       std::vector<c10::IValue> writes);

 private:
  struct Record {
    std::optional<c10::OperatorHandle> op;  // unset for a host kernel
    const OpFacts* facts = nullptr;         // what replay runs (an out= overload writes in place)
    const OpFacts* issued = nullptr;        // the operator as it was issued
    std::vector<c10::IValue> inputs;
    std::vector<c10::IValue> outputs;
    std::string host_name;
    HostKernel host_kernel;
    // The CPU kernel's arguments over the captured tensors' memory, prepared once: replay calls the
    // kernel on them directly (operators that draw random numbers go through the redirect instead).
    std::vector<c10::IValue> cpu_stack;
    c10::DeviceIndex device = -1;
  };
  static void prepare_direct_replay(Record& record);
  void refer_to_pool_by_address();
  bool records_here() const;
  const std::string& name_of(const Record& r) const {
    return r.issued != nullptr ? r.issued->name : r.host_name;
  }

  std::vector<Record> records_;
  bool capturing_ = false;
  c10::Stream stream_ = c10::Stream(c10::Stream::DEFAULT, c10::Device(c10::kCPU));
  std::thread::id thread_;
};

// True when the current stream of the current thread is capturing a graph.
bool current_stream_capturing();

// Adds a kernel that runs on the host (and again at each replay) to the graph capturing the current
// stream; false when no graph captures it (the caller just runs the kernel).
bool record_host_kernel(const std::string& name, const HostKernel& kernel, const std::vector<c10::IValue>& reads = {},
                        const std::vector<c10::IValue>& writes = {});

}  // namespace vnpu
