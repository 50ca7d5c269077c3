// Device activity for the profiler: every npu operator as a device "kernel" with the timestamps the
// redirect measured around it, its device and stream, whether real hardware would run it through the
// CPU fallback, and optionally its input / output shapes, dtypes and private formats. Recorded in C++
// (an OpHook appending to a buffer), collected once when profiling stops: no per-operator Python.
#pragma once

#include "aten/OpHooks.h"

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace vnpu {

struct TensorMeta {
  std::vector<int64_t> shape;
  std::string dtype;
  int32_t format = -1;  // torch_npu.Format value; -1 for CPU / non-tensor values
};

struct Activity {
  std::string name;  // "aten::add.Tensor"
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int device = -1;
  int64_t stream = 0;
  uint64_t thread = 0;  // at::RecordFunction::currentThreadId()
  bool cpu_fallback = false;
  bool cube = false;                // a matrix product or convolution (the card's cube unit runs it)
  bool memcpy = false;              // a copy between host and device memory (a DMA task on a card, not a kernel)
  uint64_t correlation = 0;         // the profiler's correlation id of the host operator that issued it (0: none)
  std::vector<TensorMeta> inputs;   // with shapes only
  std::vector<TensorMeta> outputs;  // with shapes only
};

// An operator hook collecting Activity records (used by torch_npu.profiler and the kineto plugin).
class ActivityRecorder final : public OpHook {
 public:
  explicit ActivityRecorder(bool record_shapes) : record_shapes_(record_shapes) {}
  void after(const OpCall& call) override;
  std::vector<Activity> take();

 private:
  const bool record_shapes_;
  std::mutex mu_;
  std::vector<Activity> activities_;
};

// Starts recording (clearing what a previous session left); record_shapes adds tensor metadata.
void start_activity_recording(bool record_shapes);
// Stops recording and hands back what was recorded.
std::vector<Activity> stop_activity_recording();
bool activity_recording();

}  // namespace vnpu
