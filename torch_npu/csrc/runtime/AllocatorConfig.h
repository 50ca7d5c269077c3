// PYTORCH_NPU_ALLOC_CONF (or PYTORCH_ALLOC_CONF) and PYTORCH_NO_NPU_MEMORY_CACHING, parsed the
// way torch_npu parses them, with torch_npu's error texts.
#pragma once

#include <atomic>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace vnpu {

struct AllocatorConfig {
  size_t max_split_size = std::numeric_limits<size_t>::max();
  size_t max_non_split_rounding_size = size_t(20) << 20;
  size_t large_segment_size = size_t(20) << 20;
  double garbage_collection_threshold = 0.0;
  bool expandable_segments = false;
  // index i covers allocation sizes in [2^(20+i), 2^(21+i)); 0 = no power-of-2 rounding
  std::vector<size_t> roundup_power2_divisions = std::vector<size_t>(16, 0);
  double per_process_memory_fraction = 1.0;
  size_t base_addr_aligned_size = 16 * 1024;
  bool caching = true;
  // Pinned host memory mapped through the card's virtual memory API; torch_npu refuses NPU graph capture with it.
  bool pin_memory_expandable_segments = false;
  // Accepted and kept for reporting; they tune host-side or hardware mechanisms vnpu does not have.
  std::vector<std::string> accepted_without_effect;
  std::string source;  // the environment variable the settings came from
  std::string text;    // its value
};

extern std::atomic<const AllocatorConfig*> g_allocator_settings;  // null until first parsed or set
// Parses the environment's settings on first use (throws RuntimeError/ValueError on invalid settings).
const AllocatorConfig& environment_allocator_config();

// The settings in force: parsed from the environment on first use, then as changed by set_allocator_settings.
// Inline: every allocation reads them.
inline const AllocatorConfig& allocator_config() {
  const AllocatorConfig* settings = g_allocator_settings.load(std::memory_order_acquire);
  return settings != nullptr ? *settings : environment_allocator_config();
}

// torch_npu.npu.memory._set_allocator_settings: the keys given replace theirs in the settings in force, with the
// environment's syntax and checks; allocations from then on follow them (segments already mapped stay as they
// are). Invalid settings raise and change nothing. torch._C._accelerator_setAllocatorSettings reaches it too.
void set_allocator_settings(const std::string& text,
                            const std::string& source = "torch_npu.npu.memory._set_allocator_settings");

// Parses a settings string onto the defaults, or onto `base`.
AllocatorConfig parse_allocator_config(const std::string& text, const std::string& source);
AllocatorConfig apply_allocator_settings(AllocatorConfig base, const std::string& text, const std::string& source);

size_t roundup_power2_divisions(const AllocatorConfig& config, size_t size);

}  // namespace vnpu
