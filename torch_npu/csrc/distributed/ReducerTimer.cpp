// DDP's runtime statistics for npu models (torch_npu registers an npu timer with c10d's TimerRegistry).
//
// DistributedDataParallel times each iteration's forward, backward compute and communication with the timer of
// the model's device; without one it warns "Time stats are currently only collected for CPU and CUDA devices"
// and its logging data (`_get_ddp_logging_data()`: avg_forward_compute_time, ...) stays empty. torch_npu's timer
// measures with npu events; npu kernels complete on the host before the call returns, so the host timestamps the
// reducer records are when the work ran.
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

#include <optional>

namespace vnpu {
namespace {

class NpuTimer : public c10d::Timer {
 public:
  explicit NpuTimer(c10::Device /*device*/) {}

  std::optional<int64_t> measureDifference(Event start, Event end) override {
    const int64_t start_time = getTimeRef(start);
    const int64_t end_time = getTimeRef(end);
    if (start_time == c10d::kUnsetTime || end_time < start_time) {
      return std::nullopt;  // an event of this iteration was not recorded (e.g. DDP without synchronisation)
    }
    return end_time - start_time;
  }
};

}  // namespace
}  // namespace vnpu

namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, vnpu::NpuTimer)
}  // namespace c10d
