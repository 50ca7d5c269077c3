#include "plan/PlanMemory.h"

#include "plan/PlanValues.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace vnpu {
namespace {

constexpr size_t kBiggestAtPeak = 10;

struct LiveBlock {
  int64_t bytes;
  uint64_t serial;
  const char* op;
  int32_t module;
  c10::DeviceIndex device;
};

struct DeviceLedger {
  PlanDeviceMemory memory;
  int64_t allocated = 0;  // now
  int64_t reserved = 0;
  uint64_t peak_generation = 0;
  uint64_t over_generation = 0;
};

struct MemoryLedger {
  std::mutex mu;  // a leaf lock, taken under the allocator's device lock
  std::unordered_map<int64_t, LiveBlock> live;
  std::map<c10::DeviceIndex, DeviceLedger> devices;
  uint64_t serial = 0;
  uint64_t generation = 0;
};
MemoryLedger& ledger() {
  static auto* l = new MemoryLedger();
  return *l;
}

struct ModuleNames {
  std::mutex mu;
  std::vector<std::string> names;
  std::unordered_map<std::string, int32_t> ids;
};
ModuleNames& module_names() {
  static auto* m = new ModuleNames();
  return *m;
}

thread_local PlanLabel tl_label;

// The largest live blocks of `device`, labelled (called under the ledger's lock).
std::vector<PlanBlock> biggest_blocks(const MemoryLedger& l, c10::DeviceIndex device) {
  std::vector<std::pair<int64_t, const std::pair<const int64_t, LiveBlock>*>> sizes;
  sizes.reserve(l.live.size());
  for (const auto& entry : l.live) {
    if (entry.second.device == device) {
      sizes.emplace_back(entry.second.bytes, &entry);
    }
  }
  const size_t n = std::min(kBiggestAtPeak, sizes.size());
  std::partial_sort(sizes.begin(), sizes.begin() + static_cast<std::ptrdiff_t>(n), sizes.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<PlanBlock> blocks;
  for (size_t i = 0; i < n; ++i) {
    const auto& [ptr, block] = *sizes[i].second;
    blocks.push_back({ptr, block.bytes, block.serial, block.op != nullptr ? block.op : "",
                      block.module >= 0 ? plan_module_name(block.module) : ""});
  }
  return blocks;
}

}  // namespace

PlanLabel& plan_label() {
  return tl_label;
}

PlanLabelScope::PlanLabelScope(const char* op, int32_t module) : previous_(tl_label) {
  tl_label.op = op;
  if (module >= 0) {
    tl_label.module = module;
  }
}

PlanLabelScope::~PlanLabelScope() {
  tl_label = previous_;
}

int32_t plan_module_id(const std::string& name) {
  auto& m = module_names();
  std::lock_guard<std::mutex> lock(m.mu);
  auto [it, inserted] = m.ids.emplace(name, static_cast<int32_t>(m.names.size()));
  if (inserted) {
    m.names.push_back(name);
  }
  return it->second;
}

std::string plan_module_name(int32_t id) {
  auto& m = module_names();
  std::lock_guard<std::mutex> lock(m.mu);
  return id >= 0 && static_cast<size_t>(id) < m.names.size() ? m.names[static_cast<size_t>(id)] : "";
}

void record_plan_memory(int64_t ptr, int64_t delta, int64_t allocated, int64_t reserved, c10::DeviceIndex device) {
  auto& l = ledger();
  std::lock_guard<std::mutex> lock(l.mu);
  DeviceLedger& d = l.devices[device];
  if (d.memory.steps.empty()) {
    d.memory.steps.emplace_back();
  }
  d.allocated = allocated;
  d.reserved = reserved;
  PlanStepPeak& step = d.memory.steps.back();
  step.allocated = std::max(step.allocated, allocated);
  step.reserved = std::max(step.reserved, reserved);
  if (delta < 0) {
    l.live.erase(ptr);
    plan_values_freed(ptr);
    return;
  }
  if (delta == 0) {
    return;
  }
  l.live[ptr] = LiveBlock{delta, ++l.serial, tl_label.op, tl_label.module, device};
  if (allocated > d.memory.peak) {
    d.memory.peak = allocated;
    d.memory.op = tl_label.op != nullptr ? tl_label.op : "";
    d.memory.module = tl_label.module >= 0 ? plan_module_name(tl_label.module) : "";
    d.memory.site.clear();
    d.memory.biggest = biggest_blocks(l, device);
    d.peak_generation = ++l.generation;
  }
}

void record_plan_over_capacity(c10::DeviceIndex device, int64_t requested, int64_t capacity) {
  auto& l = ledger();
  std::lock_guard<std::mutex> lock(l.mu);
  DeviceLedger& d = l.devices[device];
  PlanOverCapacity& over = d.memory.over_capacity;
  if (over.events++ == 0) {
    over.requested = requested;
    over.capacity = capacity;
    over.op = tl_label.op != nullptr ? tl_label.op : "";
    over.module = tl_label.module >= 0 ? plan_module_name(tl_label.module) : "";
    d.over_generation = ++l.generation;
  }
}

void end_plan_step() {
  auto& l = ledger();
  std::lock_guard<std::mutex> lock(l.mu);
  for (auto& [device, d] : l.devices) {
    d.memory.steps.push_back({d.allocated, d.reserved});
  }
}

uint64_t plan_peak_generation() {
  auto& l = ledger();
  std::lock_guard<std::mutex> lock(l.mu);
  return l.generation;
}

void set_plan_peak_site(uint64_t since, const std::string& site) {
  auto& l = ledger();
  std::lock_guard<std::mutex> lock(l.mu);
  for (auto& [device, d] : l.devices) {
    if (d.peak_generation > since) {
      d.memory.site = site;
    }
    if (d.over_generation > since) {
      d.memory.over_capacity.site = site;
    }
  }
}

std::map<c10::DeviceIndex, PlanDeviceMemory> plan_memory() {
  auto& l = ledger();
  std::lock_guard<std::mutex> lock(l.mu);
  std::map<c10::DeviceIndex, PlanDeviceMemory> out;
  for (const auto& [device, d] : l.devices) {
    out.emplace(device, d.memory);
  }
  return out;
}

uint64_t plan_block_serial(int64_t ptr) {
  auto& l = ledger();
  std::lock_guard<std::mutex> lock(l.mu);
  auto it = l.live.find(ptr);
  return it == l.live.end() ? 0 : it->second.serial;
}

}  // namespace vnpu
