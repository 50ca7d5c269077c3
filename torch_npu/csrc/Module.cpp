// torch_npu._C: the Python bindings of the C++ core.
#include "aten/Redirect.h"
#include "runtime/AllocatorConfig.h"
#include "runtime/CachingAllocator.h"
#include "runtime/Device.h"
#include "runtime/Generator.h"
#include "runtime/PinnedHostAllocator.h"
#include "runtime/SocProfile.h"
#include "runtime/Stream.h"

#include <ATen/Context.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/device_lazy_init.h>
#include <torch/extension.h>

namespace py = pybind11;

namespace {

py::dict soc_dict(const vnpu::SocProfile& soc) {
  py::dict d;
  d["name"] = soc.name;
  d["version"] = soc.version;
  d["total_memory"] = soc.total_memory;
  d["cube_core_num"] = soc.cube_core_num;
  d["vector_core_num"] = soc.vector_core_num;
  d["L2_cache_size"] = soc.l2_cache_size;
  d["fp16_tflops"] = soc.fp16_tflops;
  d["hbm_gbps"] = soc.hbm_gbps;
  d["bf16_supported"] = vnpu::soc_supports_bf16(soc);
  return d;
}

py::tuple stream_tuple(const c10::Stream& s) {
  return py::make_tuple(s.id(), s.device_index(), static_cast<int>(s.device_type()));
}

py::list snapshot_list() {
  py::list segments;
  for (const auto& seg : vnpu::memory_snapshot()) {
    py::dict d;
    d["device"] = static_cast<int>(seg.device);
    d["address"] = seg.address;
    d["total_size"] = seg.total_size;
    d["allocated_size"] = seg.allocated_size;
    d["active_size"] = seg.active_size;
    d["requested_size"] = seg.requested_size;
    d["stream"] = 0;
    d["segment_type"] = seg.small ? "small" : "large";
    d["segment_pool_id"] = py::make_tuple(0, 0);
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
  const auto& c = vnpu::allocator_config();
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
  d["accepted_without_effect"] = c.accepted_without_effect;
  return d;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "vnpu: the C++ core of the software Ascend NPU (devices, allocator, streams, redirect)";
  c10::SetAllocator(c10::DeviceType::PrivateUse1, vnpu::npu_allocator());
  vnpu::install_cpu_allocator_bridge();

  // ---- initialisation and devices
  m.def("_init", [] {
    vnpu::init_allocator();
    vnpu::soc_profile();
    torch::utils::register_fork_handler_for_device_init(at::kPrivateUse1);
    vnpu::mark_device_initialized();
    at::globalContext().lazyInitDevice(c10::DeviceType::PrivateUse1);
  });
  m.def("_is_in_bad_fork", [] { return torch::utils::is_device_in_bad_fork(at::kPrivateUse1); });
  m.def("_device_count", [] { return static_cast<int>(vnpu::device_count()); });
  m.def("_device_config_error", [] { return vnpu::device_config_error(); });
  m.def("_current_device", [] { return static_cast<int>(vnpu::current_device()); });
  m.def("_set_device", [](int d) { vnpu::set_device(static_cast<c10::DeviceIndex>(d)); });
  m.def("_exchange_device", [](int d) {
    return static_cast<int>(vnpu::exchange_device(static_cast<c10::DeviceIndex>(d)));
  });
  m.def("_check_device", [](int d) { vnpu::check_device_index(static_cast<c10::DeviceIndex>(d)); });
  m.def("_physical_device_id", [](int d) { return vnpu::physical_device_id(static_cast<c10::DeviceIndex>(d)); });
  m.def("_soc_profile", [] { return soc_dict(vnpu::soc_profile()); });
  m.def("_known_socs", [] {
    py::list names;
    for (const auto& soc : vnpu::known_socs()) {
      names.append(soc.name);
    }
    return names;
  });
  m.def("_device_capacity", [] { return vnpu::device_capacity(); });

  // ---- generators
  m.def("_default_generator", [](int d) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(vnpu::default_generator(static_cast<c10::DeviceIndex>(d))));
  });

  // ---- memory
  m.def("_allocator_config", &allocator_config_dict);
  m.def("_set_memory_fraction", [](double f, int d) { vnpu::set_memory_fraction(f, static_cast<c10::DeviceIndex>(d)); });
  m.def("_get_memory_fraction", [](int d) { return vnpu::get_memory_fraction(static_cast<c10::DeviceIndex>(d)); });
  m.def("_mem_get_info", [](int d) { return vnpu::device_memory_info(static_cast<c10::DeviceIndex>(d)); });
  m.def("_memory_snapshot", &snapshot_list);
  m.def("_pinned_host_stats", [] {
    const auto s = vnpu::pinned_host_stats();
    py::dict d;
    d["num_host_alloc"] = s.num_host_alloc;
    d["num_host_free"] = s.num_host_free;
    d["allocations"] = s.allocations;
    d["allocated_bytes"] = s.allocated_bytes;
    d["reserved_bytes"] = s.reserved_bytes;
    return d;
  });
  m.def("_empty_pinned_cache", &vnpu::empty_pinned_cache);

  // ---- streams
  m.def("_current_stream", [](int d) { return stream_tuple(vnpu::current_stream(static_cast<c10::DeviceIndex>(d))); });
  m.def("_default_stream", [](int d) { return stream_tuple(vnpu::default_stream(static_cast<c10::DeviceIndex>(d))); });
  m.def("_pool_stream", [](int d, int priority) {
    return stream_tuple(vnpu::pool_stream(static_cast<c10::DeviceIndex>(d), priority));
  });
  m.def("_validate_stream", [](int64_t id, int d) {
    return stream_tuple(vnpu::make_stream(id, static_cast<c10::DeviceIndex>(d)));
  });
  m.def("_stream_handle", [](int64_t id, int d) {
    return reinterpret_cast<uintptr_t>(
        vnpu::stream_native_handle(vnpu::make_stream(id, static_cast<c10::DeviceIndex>(d))));
  });
  m.def("_stream_priority", [](int64_t id, int d) {
    return vnpu::stream_priority(vnpu::make_stream(id, static_cast<c10::DeviceIndex>(d)));
  });
  m.def("_streams_per_device", &vnpu::streams_per_device);
  m.def("_event_elapsed_ms", &vnpu::event_elapsed_ms);

  // ---- operator redirect
  m.def("_register_redirects", &vnpu::register_redirects);
  m.def("_redirect_calls", &vnpu::redirect_calls);
  m.def("_cpu_alias", &vnpu::owning_cpu_alias, "CPU tensor over an npu tensor's memory (keeps it alive)");
}
