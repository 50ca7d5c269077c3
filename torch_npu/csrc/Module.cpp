// torch_npu._C: the Python bindings of the C++ core.
#include "profiler/KinetoNpuProfiler.h"
#include "profiler/ProfilerStubs.h"
#include "python/Bindings.h"
#include "runtime/CachingAllocator.h"
#include "runtime/Device.h"
#include "runtime/ExternalStream.h"
#include "runtime/Generator.h"
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

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "vnpu: the C++ core of the software Ascend NPU (devices, allocator, streams, redirect)";
  c10::SetAllocator(c10::DeviceType::PrivateUse1, vnpu::npu_allocator());
  vnpu::register_npu_storage_creation();
  vnpu::install_cpu_allocator_bridge();
  vnpu::register_kineto_npu_profiler();  // npu kernels in torch.profiler with ProfilerActivity.PrivateUse1
  vnpu::register_profiler_stubs();       // npu times in the legacy / marker-only profiler
  m.def("_kineto_npu_kernels", [](bool enabled) {
    const bool before = vnpu::kineto_npu_kernels_enabled();
    vnpu::set_kineto_npu_kernels(enabled);
    return before;
  });

  // ---- initialisation and devices
  m.def("_init", [] {
    vnpu::init_allocator();
    vnpu::soc_profile();
    torch::utils::register_fork_handler_for_device_init(at::kPrivateUse1);
    vnpu::mark_device_initialized();
    at::globalContext().lazyInitDevice(c10::DeviceType::PrivateUse1);
  });
  m.def("_is_in_bad_fork", [] { return torch::utils::is_device_in_bad_fork(at::kPrivateUse1); });
  // torch_npu's name for "the next npu tensor a factory makes initialises the device again" (torch.npu._lazy_init,
  // which refuses in a forked child): PyTorch keeps that first-use flag per device type
  m.def("_npu_set_run_yet_variable_to_false",
        [] { torch::utils::set_requires_device_init(at::kPrivateUse1, /*value=*/true); });
  m.def("_device_count", [] { return static_cast<int>(vnpu::device_count()); });
  // torch_npu's name: the count re-reads ASCEND_RT_VISIBLE_DEVICES until the runtime is initialised
  m.def("_npu_getDeviceCount", [] { return static_cast<int>(vnpu::device_count()); });
  m.def("_device_config_error", [] { return vnpu::device_config_error(); });
  // torch._C._cuda_hasPrimaryContext's counterpart: whether the device has been used (made current, given
  // memory or run a kernel), which decides the devices whose streams the autograd engine stashes
  m.def("_npu_hasPrimaryContext", [](int d) { return vnpu::has_device_context(static_cast<c10::DeviceIndex>(d)); });
  m.def("_current_device", [] { return static_cast<int>(vnpu::current_device()); });
  m.def("_set_device", [](int d) { vnpu::set_device(static_cast<c10::DeviceIndex>(d)); });
  m.def("_exchange_device",
        [](int d) { return static_cast<int>(vnpu::exchange_device(static_cast<c10::DeviceIndex>(d))); });
  m.def("_check_device", [](int d) { vnpu::check_device_index(static_cast<c10::DeviceIndex>(d)); });
  m.def("_physical_device_id", [](int d) { return vnpu::physical_device_id(static_cast<c10::DeviceIndex>(d)); });
  m.def("_soc_profile", [] { return soc_dict(vnpu::soc_profile()); });
  m.def("_known_socs", [] {
    py::list out;
    for (const auto& soc : vnpu::known_socs()) {
      out.append(soc_dict(soc));
    }
    return out;
  });
  m.def("_device_capacity", [] { return vnpu::device_capacity(); });

  // ---- generators
  m.def("_default_generator", [](int d) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(vnpu::default_generator(static_cast<c10::DeviceIndex>(d))));
  });

  vnpu::python::bind_memory(m);
  vnpu::python::bind_graph_tree(m);
  vnpu::python::bind_tensors(m);

  // ---- streams
  m.def("_current_stream",
        [](int d) { return vnpu::python::stream_parts(vnpu::current_stream(static_cast<c10::DeviceIndex>(d))); });
  m.def("_default_stream",
        [](int d) { return vnpu::python::stream_parts(vnpu::default_stream(static_cast<c10::DeviceIndex>(d))); });
  m.def("_pool_stream", [](int d, int priority) {
    return vnpu::python::stream_parts(vnpu::pool_stream(static_cast<c10::DeviceIndex>(d), priority));
  });
  m.def("_validate_stream", [](int64_t id, int64_t device_index, int64_t device_type) {
    return vnpu::python::stream_parts(vnpu::stream_from_parts(id, device_index, device_type));
  });
  m.def("_external_stream", [](int d, uintptr_t handle) {
    return vnpu::python::stream_parts(
        vnpu::external_stream(static_cast<c10::DeviceIndex>(d), reinterpret_cast<void*>(handle)));
  });
  // torch_npu.npu.npurt(): the runtime calls torch_npu exposes, returning ACL error codes (0 is success).
  auto npurt = m.def_submodule("_npurt", "NPU runtime API bindings");
  npurt.def("npuStreamCreate", [](uintptr_t out) { return vnpu::create_raw_stream(reinterpret_cast<void**>(out)); });
  npurt.def("npuStreamDestroy",
            [](uintptr_t handle) { return vnpu::destroy_raw_stream(reinterpret_cast<void*>(handle)); });
  npurt.def("npuHostRegister", [](uintptr_t ptr, size_t size, uint32_t flags) {
    return vnpu::host_register(reinterpret_cast<void*>(ptr), size, flags);
  });
  npurt.def("npuHostUnregister", [](uintptr_t ptr) { return vnpu::host_unregister(reinterpret_cast<void*>(ptr)); });
  m.def("_stream_handle", [](int64_t id, int d) {
    return reinterpret_cast<uintptr_t>(
        vnpu::stream_native_handle(vnpu::make_stream(id, static_cast<c10::DeviceIndex>(d))));
  });
  // torch_npu's names: the raw handle of a device's current stream (NoWait: without waiting for queued work,
  // the same here since operators complete when they return)
  auto current_raw_stream = [](int d) {
    return reinterpret_cast<uintptr_t>(
        vnpu::stream_native_handle(vnpu::current_stream(static_cast<c10::DeviceIndex>(d))));
  };
  m.def("_npu_getCurrentRawStream", current_raw_stream);
  m.def("_npu_getCurrentRawStreamNoWait", current_raw_stream);
  m.def("_stream_priority", [](int64_t id, int d) {
    return vnpu::stream_priority(vnpu::make_stream(id, static_cast<c10::DeviceIndex>(d)));
  });
  m.def("_streams_per_device", &vnpu::streams_per_device);
  m.def("_event_elapsed_ms", &vnpu::event_elapsed_ms);
  m.def("_event_recorded_ns", &vnpu::event_recorded_ns);
  m.def("_typed_stream", [](int d, int type) {
    return vnpu::python::stream_parts(
        vnpu::typed_pool_stream(static_cast<c10::DeviceIndex>(d), static_cast<vnpu::StreamType>(type)));
  });
  m.def("_is_device_stopped", [](int d) {
    vnpu::check_device_index(static_cast<c10::DeviceIndex>(d));
    return (vnpu::g_stopped_devices.load() & (uint64_t(1) << d)) != 0;
  });
  // torch_npu's silent-check generation: 1, the gradient detector of torch_npu.asd.asd runs in Python
  m.def("_get_silent_check_version", [] { return 1; });
  m.def("_set_device_stopped",
        [](int d, bool stopped) { vnpu::set_device_stopped(static_cast<c10::DeviceIndex>(d), stopped); });

  vnpu::python::bind_ops(m);
  vnpu::python::bind_plan(m);
  vnpu::python::bind_trace(m);
  vnpu::python::bind_distributed(m);
  vnpu::python::bind_aoti(m);
  vnpu::python::bind_runtime_entry_points(m);
}
