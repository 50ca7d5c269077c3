// Planning mode's view of npu memory, fed by the caching allocator under its device lock: every live
// block with what made it (the operator and the module that ran it), each device's allocated peak with
// the biggest blocks alive at that instant, and the peaks of every step (a step ends when an optimizer
// steps). Outside planning mode nothing here runs.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace vnpu {

// What the calling thread is running, for the blocks it allocates: the operator (a registered schema's
// name, which lives as long as the process) and the module (plan_module_name's id, -1 for none).
struct PlanLabel {
  const char* op = nullptr;
  int32_t module = -1;
};
PlanLabel& plan_label();

// Labels this thread's allocations with an operator (and a module, when given) while alive.
class PlanLabelScope {
 public:
  PlanLabelScope(const char* op, int32_t module);
  ~PlanLabelScope();
  PlanLabelScope(const PlanLabelScope&) = delete;
  PlanLabelScope& operator=(const PlanLabelScope&) = delete;

 private:
  PlanLabel previous_;
};

// Module names are interned: id <-> name.
int32_t plan_module_id(const std::string& name);
std::string plan_module_name(int32_t id);

// The allocator's report of one block allocated (delta > 0) or freed (delta < 0) and the device's
// allocated and reserved bytes after it.
void record_plan_memory(int64_t ptr, int64_t delta, int64_t allocated, int64_t reserved, c10::DeviceIndex device);

// The allocator gave `device` a segment beyond what the card holds (runtime/HostMemory.h,
// plan_over_capacity): `requested` bytes, `capacity` the card's.
void record_plan_over_capacity(c10::DeviceIndex device, int64_t requested, int64_t capacity);

// Closes the current step on every device (its peaks are kept) and opens the next.
void end_plan_step();

// A new allocated peak (or a first request beyond the card) bumps this; whoever caused it names the
// program line of everything after generation `since` (set_plan_peak_site).
uint64_t plan_peak_generation();
void set_plan_peak_site(uint64_t since, const std::string& site);

struct PlanBlock {
  int64_t ptr = 0;
  int64_t bytes = 0;
  uint64_t serial = 0;  // which allocation of the process made it (1, 2, ...)
  std::string op;
  std::string module;
};
struct PlanStepPeak {
  int64_t allocated = 0;
  int64_t reserved = 0;
};
// Where a device would have run out of memory: the first request beyond the card, and how often.
struct PlanOverCapacity {
  int64_t events = 0;
  int64_t requested = 0;  // the first one's
  int64_t capacity = 0;
  std::string op;
  std::string module;
  std::string site;
};
struct PlanDeviceMemory {
  PlanOverCapacity over_capacity;
  int64_t peak = 0;  // allocated bytes at the peak
  std::string op;    // what allocated the block that made the peak
  std::string module;
  std::string site;                 // the program line, when known
  std::vector<PlanBlock> biggest;   // the largest blocks alive at the peak, largest first
  std::vector<PlanStepPeak> steps;  // every step, the open one last
};
std::map<c10::DeviceIndex, PlanDeviceMemory> plan_memory();

// The allocation serial of the live block at `ptr` (0 if none): a block at the peak is the same
// tensor now when its serial is unchanged.
uint64_t plan_block_serial(int64_t ptr);

}  // namespace vnpu
