#include "runtime/AllocatorConfig.h"

#include <c10/core/AllocatorConfig.h>
#include <c10/util/Exception.h>
#include <c10/util/llvmMathExtras.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

namespace vnpu {
namespace {

constexpr size_t kMB = size_t(1) << 20;
using Tokens = c10::CachingAllocator::ConfigTokenizer;

bool is_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

void expect_colon(const Tokens& t, size_t i, const std::string& key) {
  TORCH_CHECK(i < t.size() && t[i] == ":", "Error parsing NPU allocator config, expected ':' after ", key);
}

const std::string& value_at(const Tokens& t, size_t i, const std::string& key) {
  TORCH_CHECK(i < t.size(), "Error, expecting ", key, " value");
  return t[i];
}

size_t parse_size_mb(const Tokens& t, size_t i, const std::string& key, size_t min_mb, size_t max_mb,
                     const char* range_text) {
  const auto& v = value_at(t, i, key);
  TORCH_CHECK(is_digits(v), "CachingAllocator option ", key, " is invalid: '", v, "' is not a whole number of MB");
  size_t mb = std::stoull(v);
  TORCH_CHECK(mb >= min_mb && mb <= max_mb, "CachingAllocator option ", key, " error, must be ", range_text,
              ", dtype is int");
  return mb * kMB;
}

bool parse_bool(const Tokens& t, size_t i, const std::string& key) {
  const auto& v = value_at(t, i, key);
  TORCH_CHECK(v == "True" || v == "False", "Expected a single True/False argument for ", key);
  return v == "True";
}

double parse_double(const std::string& v, const std::string& key) {
  char* end = nullptr;
  double d = std::strtod(v.c_str(), &end);
  TORCH_CHECK(end != nullptr && *end == '\0' && !v.empty(), key, " is invalid: '", v, "' is not a number");
  return d;
}

size_t parse_roundup(const Tokens& t, size_t i, AllocatorConfig& c) {
  const auto& first = value_at(t, i, "roundup_power2_divisions");
  if (first != "[") {
    TORCH_CHECK(is_digits(first), "roundup_power2_divisions is invalid: '", first, "'");
    size_t v = std::stoull(first);
    TORCH_CHECK(c10::llvm::isPowerOf2_64(v), "For roundups, the divisons has to be power of 2 ");
    std::fill(c.roundup_power2_divisions.begin(), c.roundup_power2_divisions.end(), v);
    return i;
  }
  size_t last_index = 0;
  bool first_value = true;
  while (++i < t.size() && t[i] != "]") {
    const std::string interval = t[i];
    expect_colon(t, ++i, "roundup_power2_divisions interval");
    const auto& div_text = value_at(t, ++i, "roundup_power2_divisions");
    TORCH_CHECK(is_digits(div_text), "Error parsing roundup_power2_divisions value");
    size_t div = std::stoull(div_text);
    TORCH_CHECK(div == 0 || c10::llvm::isPowerOf2_64(div),
                "For roundups, the divisons has to be power of 2 or 0 to disable roundup ");
    auto& d = c.roundup_power2_divisions;
    if (interval == ">") {
      std::fill(d.begin() + static_cast<std::ptrdiff_t>(last_index), d.end(), div);
    } else {
      TORCH_CHECK(is_digits(interval), "Error parsing roundup_power2_divisions interval '", interval, "'");
      size_t mb = std::stoull(interval);
      TORCH_CHECK(c10::llvm::isPowerOf2_64(mb), "For roundups, the intervals have to be power of 2 ");
      size_t index = std::min<size_t>(63 - c10::llvm::countLeadingZeros(mb), d.size() - 1);
      if (first_value) {
        std::fill(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(index), div);
        first_value = false;
      }
      d[index] = div;
      last_index = index;
    }
    if (i + 1 < t.size() && t[i + 1] == ",") {
      ++i;
    }
  }
  TORCH_CHECK(i < t.size(), "Expected closing bracket ']' in roundup_power2_divisions");
  return i;
}

const std::vector<std::string>& known_keys() {
  static const std::vector<std::string> keys = {"max_split_size_mb",
                                                "max_non_split_rounding_mb",
                                                "garbage_collection_threshold",
                                                "expandable_segments",
                                                "roundup_power2_divisions",
                                                "large_segment_size_mb",
                                                "segment_size_mb",
                                                "per_process_memory_fraction",
                                                "base_addr_aligned_kb",
                                                "page_size",
                                                "multi_stream_lazy_reclaim",
                                                "pinned_use_background_threads",
                                                "pin_memory_expandable_segments",
                                                "pinned_mem_register",
                                                "release_lock_on_npumalloc",
                                                "throw_on_npumalloc_oom",
                                                "pinned_max_round_threshold_mb",
                                                "pinned_max_cached_size_mb",
                                                "pinned_reserve_segment_size_mb"};
  return keys;
}

void note_without_effect(AllocatorConfig& c, const std::string& key) {
  auto& keys = c.accepted_without_effect;
  if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
    keys.push_back(key);
  }
}

AllocatorConfig from_environment() {
  const char* npu = std::getenv("PYTORCH_NPU_ALLOC_CONF");
  const char* generic = std::getenv("PYTORCH_ALLOC_CONF");
  AllocatorConfig c;
  if (npu != nullptr) {
    c = parse_allocator_config(npu, "PYTORCH_NPU_ALLOC_CONF");
  } else if (generic != nullptr) {
    c = parse_allocator_config(generic, "PYTORCH_ALLOC_CONF");
  }
  const char* no_cache = std::getenv("PYTORCH_NO_NPU_MEMORY_CACHING");
  if (no_cache != nullptr) {
    std::string v(no_cache);
    TORCH_CHECK_VALUE(v == "0" || v == "1", "PYTORCH_NO_NPU_MEMORY_CACHING='", v,
                      "' is invalid: set it to 1 to disable the caching allocator (or 0)");
    c.caching = v != "1";
  }
  return c;
}

}  // namespace

AllocatorConfig parse_allocator_config(const std::string& text, const std::string& source) {
  return apply_allocator_settings(AllocatorConfig(), text, source);
}

AllocatorConfig apply_allocator_settings(AllocatorConfig c, const std::string& text, const std::string& source) {
  c.source = source;
  c.text = text;
  Tokens t(text);
  bool large_segment_given = false;  // large_segment_size_mb outranks the deprecated segment_size_mb
  const auto& known = known_keys();
  for (size_t i = 0; i < t.size(); ++i) {
    const std::string key = t[i];
    TORCH_CHECK_VALUE(std::find(known.begin(), known.end(), key) != known.end(), "Unrecognized key '", key,
                      "' in NPU allocator config.");
    expect_colon(t, i + 1, key);
    i += 2;
    if (key == "max_split_size_mb") {
      const auto& v = value_at(t, i, key);
      TORCH_CHECK(is_digits(v), "CachingAllocator option max_split_size_mb is invalid: '", v, "'");
      size_t mb = std::stoull(v);
      TORCH_CHECK(mb > 20, "CachingAllocator option max_split_size_mb too small, must be > 20");
      c.max_split_size = mb * kMB;
    } else if (key == "max_non_split_rounding_mb") {
      c.max_non_split_rounding_size = parse_size_mb(t, i, key, 20, size_t(1) << 40, ">= 20");
    } else if (key == "garbage_collection_threshold") {
      double v = parse_double(value_at(t, i, key), key);
      TORCH_CHECK(v > 0.0 && v < 1.0, "garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
      c.garbage_collection_threshold = v;
    } else if (key == "expandable_segments") {
      c.expandable_segments = parse_bool(t, i, key);
    } else if (key == "roundup_power2_divisions") {
      i = parse_roundup(t, i, c);
    } else if (key == "large_segment_size_mb") {
      c.large_segment_size = parse_size_mb(t, i, key, 11, size_t(1) << 40, "> 10");
      large_segment_given = true;
    } else if (key == "segment_size_mb") {
      TORCH_WARN_ONCE("`segment_size_mb` is deprecated, please use `large_segment_size_mb` instead.");
      const size_t size = parse_size_mb(t, i, key, 20, 512, "[20, 512]");
      c.large_segment_size = large_segment_given ? c.large_segment_size : size;
    } else if (key == "per_process_memory_fraction") {
      double v = parse_double(value_at(t, i, key), key);
      TORCH_CHECK(v >= 0.0 && v <= 1.0, "per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
      c.per_process_memory_fraction = v;
    } else if (key == "base_addr_aligned_kb") {
      const auto& v = value_at(t, i, key);
      TORCH_CHECK(is_digits(v) && v.size() <= 2 && std::stoull(v) <= 16,
                  "CachingAllocator option base_addr_aligned_kb error, must be [0~16], dtype is int");
      c.base_addr_aligned_size = std::stoull(v) * 1024;
    } else if (key == "page_size") {
      TORCH_CHECK(value_at(t, i, key) == "1g", "Unsupported page_size value: ", t[i]);
      note_without_effect(c, key);
    } else if (key == "pin_memory_expandable_segments") {
      c.pin_memory_expandable_segments = parse_bool(t, i, key);
      note_without_effect(c, key);
    } else if (key == "multi_stream_lazy_reclaim" || key == "pinned_use_background_threads" ||
               key == "pinned_mem_register" || key == "release_lock_on_npumalloc" || key == "throw_on_npumalloc_oom") {
      parse_bool(t, i, key);
      note_without_effect(c, key);
    } else if (key == "pinned_max_round_threshold_mb" || key == "pinned_max_cached_size_mb" ||
               key == "pinned_reserve_segment_size_mb") {
      TORCH_CHECK(is_digits(value_at(t, i, key)), "CachingAllocator option ", key, " is invalid: '", t[i], "'");
      note_without_effect(c, key);
    }
    if (i + 1 < t.size()) {
      TORCH_CHECK(t[i + 1] == ",", "Error parsing NPU allocator config, expected ',' after the value of ", key);
      ++i;
    }
  }
  TORCH_CHECK(c.max_split_size >= c.large_segment_size, "CachingAllocator option max_split_size_mb (",
              c.max_split_size / kMB, ") must be greater than or equal to large_segment_size_mb (",
              c.large_segment_size / kMB, ")");
  TORCH_CHECK(!c.expandable_segments ||
                  (c.max_split_size == std::numeric_limits<size_t>::max() && c.garbage_collection_threshold == 0),
              "`max_split_size_mb` or `garbage_collection_threshold`, cannot be enabled with "
              "`expandable_segments`, please set `expandable_segments` to `False`.");
  return c;
}

namespace {

std::mutex g_settings_mutex;

}  // namespace

std::atomic<const AllocatorConfig*> g_allocator_settings{nullptr};

const AllocatorConfig& environment_allocator_config() {
  static const AllocatorConfig* from_env = [] {
    const auto* parsed = new AllocatorConfig(from_environment());
    const AllocatorConfig* none = nullptr;
    g_allocator_settings.compare_exchange_strong(none, parsed);  // unless settings were set meanwhile
    return parsed;
  }();
  const AllocatorConfig* settings = g_allocator_settings.load(std::memory_order_acquire);
  return settings != nullptr ? *settings : *from_env;
}

void set_allocator_settings(const std::string& text, const std::string& source) {
  std::lock_guard<std::mutex> lock(g_settings_mutex);
  auto next = std::make_unique<AllocatorConfig>(apply_allocator_settings(allocator_config(), text, source));
  // The settings replaced stay allocated: an allocation in progress may still read them.
  g_allocator_settings.store(next.release(), std::memory_order_release);
}

namespace {

// PyTorch's device-generic entry, torch._C._accelerator_setAllocatorSettings (which
// torch.cuda.memory._set_allocator_settings calls, so migrated CUDA code too), parses the keys every
// accelerator shares and hands the whole string to the device's parser hook, as it does torch_npu's; the
// keys only NPU settings have are registered with it so that it accepts them.
const bool kAcceleratorHookRegistered = [] {
  using c10::CachingAllocator::AcceleratorAllocatorConfig;
  std::unordered_set<std::string> npu_only;
  const auto& shared = AcceleratorAllocatorConfig::getKeys();
  for (const auto& key : known_keys()) {
    if (shared.count(key) == 0) {
      npu_only.insert(key);
    }
  }
  AcceleratorAllocatorConfig::registerDeviceConfigParserHook(
      [](const std::string& env) { set_allocator_settings(env, "torch._C._accelerator_setAllocatorSettings"); },
      npu_only);
  return true;
}();

}  // namespace

size_t roundup_power2_divisions(const AllocatorConfig& config, size_t size) {
  const size_t log_size = 63 - c10::llvm::countLeadingZeros(static_cast<uint64_t>(size));
  const int index = std::clamp(static_cast<int>(log_size) - 20, 0, 15);
  return config.roundup_power2_divisions[static_cast<size_t>(index)];
}

}  // namespace vnpu
