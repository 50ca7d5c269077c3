// Python bindings of npu memory: allocator settings and statistics, snapshots and history,
// memory pools, pluggable allocators, pinned host memory.
#include "python/Bindings.h"

#include "runtime/AllocatorConfig.h"
#include "runtime/CachingAllocator.h"
#include "runtime/ErrorCode.h"
#include "runtime/MemoryHistory.h"
#include "runtime/OomObservers.h"
#include "runtime/PinnedHostAllocator.h"
#include "runtime/PluggableAllocator.h"
#include "runtime/ProfilerMemory.h"
#include "runtime/SharedStorage.h"

#include <pybind11/stl.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/csrc/utils/pybind.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace py = pybind11;

// From torch/csrc/profiler/python/combined_traceback.h (libtorch_python), declared here because
// that header needs nlohmann/json, which torch's wheel does not ship.
namespace torch {
std::vector<pybind11::object> py_symbolize(std::vector<CapturedTraceback*>& to_symbolize);
void installCapturedTracebackPython();
}  // namespace torch

namespace vnpu::python {
namespace {

py::list snapshot_list() {
  py::list segments;
  for (const auto& seg : memory_snapshot()) {
    py::dict d;
    d["device"] = static_cast<int>(seg.device);
    d["address"] = seg.address;
    d["total_size"] = seg.total_size;
    d["allocated_size"] = seg.allocated_size;
    d["active_size"] = seg.active_size;
    d["requested_size"] = seg.requested_size;
    d["stream"] = 0;
    d["segment_type"] = seg.small ? "small" : "large";
    d["segment_pool_id"] = py::make_tuple(0, seg.pool);
    d["is_expandable"] = false;
    d["frames"] = py::list();
    py::list blocks;
    for (const auto& b : seg.blocks) {
      py::dict bd;
      bd["address"] = b.address;
      bd["size"] = b.size;
      bd["requested_size"] = b.requested;
      bd["state"] = b.allocated ? "active_allocated" : "inactive";
      bd["frames"] = py::list();
      blocks.append(bd);
    }
    d["blocks"] = blocks;
    segments.append(d);
  }
  return segments;
}

py::dict allocator_config_dict() {
  const auto& c = allocator_config();
  py::dict d;
  d["source"] = c.source;
  d["text"] = c.text;
  d["max_split_size"] = c.max_split_size;
  d["max_non_split_rounding_size"] = c.max_non_split_rounding_size;
  d["large_segment_size"] = c.large_segment_size;
  d["garbage_collection_threshold"] = c.garbage_collection_threshold;
  d["expandable_segments"] = c.expandable_segments;
  d["roundup_power2_divisions"] = c.roundup_power2_divisions;
  d["per_process_memory_fraction"] = c.per_process_memory_fraction;
  d["caching"] = c.caching;
  d["pin_memory_expandable_segments"] = c.pin_memory_expandable_segments;
  d["accepted_without_effect"] = c.accepted_without_effect;
  return d;
}

std::shared_ptr<c10::GatheredContext> gather_python_stack() {
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/false, /*cpp=*/false);
}

// History entries in the shape of torch.cuda.memory._snapshot()["device_traces"] items.
py::list history_list(const std::vector<HistoryEntry>& entries) {
  std::vector<torch::CapturedTraceback*> stacks;
  for (const auto& e : entries) {
    stacks.push_back(dynamic_cast<torch::CapturedTraceback*>(e.context.get()));
  }
  std::vector<torch::CapturedTraceback*> to_symbolize;
  for (auto* s : stacks) {
    if (s != nullptr) {
      to_symbolize.push_back(s);
    }
  }
  std::vector<py::object> frames = torch::py_symbolize(to_symbolize);
  py::list out;
  size_t next = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    py::dict d;
    d["action"] = e.action;
    d["device"] = static_cast<int>(e.device);
    d["addr"] = e.address;
    d["size"] = e.size;
    d["stream"] = 0;
    d["time_us"] = e.time_us;
    d["frames"] = stacks[i] != nullptr ? frames[next++] : py::list();
    out.append(d);
  }
  return out;
}

// The thread that holds the allocator's free mutex through _npu_lock_mutex (none: a default id).
std::atomic<std::thread::id> g_free_mutex_owner{};

// torch_npu._C._npu_lock_mutex, as CUDA's: waits with the GIL released between attempts, and returns holding
// both, so a thread that frees npu memory without the GIL cannot be waited on by one that needs the GIL.
void lock_free_mutex() {
  TORCH_CHECK(g_free_mutex_owner.load() != std::this_thread::get_id(),
              "the npu allocator's free mutex is already held by this thread",
              error_suffix(SubModule::kPta, kErrParam, "invalid parameter"));
  while (!free_mutex().try_lock()) {
    py::gil_scoped_release no_gil;
    std::this_thread::sleep_for(std::chrono::microseconds(10));
  }
  g_free_mutex_owner = std::this_thread::get_id();
}

void unlock_free_mutex() {
  TORCH_CHECK(g_free_mutex_owner.load() == std::this_thread::get_id(),
              "the npu allocator's free mutex is not held by this thread",
              error_suffix(SubModule::kPta, kErrParam, "invalid parameter"));
  g_free_mutex_owner = std::thread::id();
  free_mutex().unlock();
}

}  // namespace

void bind_memory(py::module& m) {
  m.def("_share_npu_storage", &share_npu_storage);
  m.def("_open_shared_npu_storage", &open_shared_npu_storage);
  m.def("_allocator_config", &allocator_config_dict);
  m.def("_set_memory_fraction", [](double f, int d) { set_memory_fraction(f, static_cast<c10::DeviceIndex>(d)); });
  m.def("_get_memory_fraction", [](int d) { return get_memory_fraction(static_cast<c10::DeviceIndex>(d)); });
  m.def("_mem_get_info", [](int d) { return device_memory_info(static_cast<c10::DeviceIndex>(d)); });
  m.def("_memory_snapshot", &snapshot_list);

  m.def("_record_memory_history", [](bool enabled, bool trace, bool stacks, size_t max_entries) {
    if (enabled && stacks) {
      torch::installCapturedTracebackPython();
    }
    set_memory_history(enabled, trace, stacks ? &gather_python_stack : nullptr, max_entries);
  });
  m.def("_memory_history", [] { return history_list(memory_history()); });
  m.def("_memory_live_allocations", [] { return history_list(live_allocation_events()); });
  // torch_npu.profiler's profile_memory: allocator events as tuples
  // (ptr, bytes, allocated, reserved, active, device, stream, time_ns, thread, correlation).
  m.def("_profiler_memory_start", &start_profiler_memory);
  m.def("_profiler_memory_stop", [] {
    py::list out;
    for (const auto& e : stop_profiler_memory()) {
      out.append(py::make_tuple(e.ptr, e.bytes, e.allocated, e.reserved, e.active, e.device, e.stream, e.time_ns,
                                e.thread, e.correlation));
    }
    return out;
  });

  m.def("_create_mem_pool", &create_mem_pool);
  // Both may wait for the free mutex (_npu_lock_mutex): they wait without the GIL, so its holder can go on.
  m.def("_release_mem_pool", &release_mem_pool, py::call_guard<py::gil_scoped_release>());
  m.def(
      "_empty_cache", [] { npu_allocator()->emptyCache(c10::MempoolId_t{0, 0}); },
      py::call_guard<py::gil_scoped_release>());
  m.def("_set_thread_mem_pool", [](int d, uint64_t id) { set_thread_mem_pool(static_cast<c10::DeviceIndex>(d), id); });
  m.def("_thread_mem_pool", [](int d) { return thread_mem_pool(static_cast<c10::DeviceIndex>(d)); });

  py::class_<PluggableFunctions>(m, "_PluggableFunctions").def_readonly("path", &PluggableFunctions::path);
  m.def("_load_pluggable_allocator", &load_pluggable_allocator);
  m.def("_use_pluggable_allocator", &use_pluggable_allocator);

  m.def("_pinned_host_stats", [] {
    const auto s = pinned_host_stats();
    py::dict d;
    d["num_host_alloc"] = s.num_host_alloc;
    d["num_host_free"] = s.num_host_free;
    d["allocations"] = s.allocations;
    d["allocations_peak"] = s.allocations_peak;
    d["allocated_bytes"] = s.allocated_bytes;
    d["allocated_bytes_peak"] = s.allocated_bytes_peak;
    d["reserved_bytes"] = s.reserved_bytes;
    d["reserved_bytes_peak"] = s.reserved_bytes_peak;
    return d;
  });
  m.def("_empty_pinned_cache", &empty_pinned_cache);
  // torch_npu's name for it (torch._C._host_emptyCache on CUDA)
  m.def("_npu_hostEmptyCache", &empty_pinned_cache);
  m.def("_npu_npuCachingAllocator_set_allocator_settings", [](const std::string& env) { set_allocator_settings(env); });
  m.def("_npu_attach_out_of_memory_observer", [](py::object observer) {
    // kept for the life of the process, as torch_npu keeps it (the interpreter may be gone at exit)
    PyObject* fn = observer.release().ptr();
    attach_oom_observer([fn](int64_t device, int64_t alloc, int64_t device_total, int64_t device_free) {
      py::gil_scoped_acquire gil;
      py::handle observer_fn(fn);
      observer_fn(device, alloc, device_total, device_free);
    });
  });
  m.def("_reset_pinned_host_peaks", &reset_pinned_host_peaks);
  m.def("_reset_pinned_host_accumulated", &reset_pinned_host_accumulated);
  m.def("_npu_lock_mutex", &lock_free_mutex);
  m.def("_npu_unlock_mutex", &unlock_free_mutex);
}

}  // namespace vnpu::python
