// torch_npu's _C runtime entry points under their names (torch_npu._C._npu_getDevice, _npu_emptyCache,
// _npu_get_soc_version, ...). torch_npu's Python layer calls them, and so do programs and libraries written
// for it. Each one is what the torch.npu function built on it does on vnpu, so both answer alike: most call
// that function; the few with a direct counterpart in the C++ core call the core.
#include "python/Bindings.h"

#include "aten/FftPlans.h"
#include "aten/HostSync.h"
#include "distributed/SilentCheck.h"
#include "runtime/Device.h"
#include "runtime/ErrorCode.h"
#include "runtime/SocProfile.h"
#include "runtime/Stream.h"

#include <pybind11/stl.h>

namespace py = pybind11;

namespace vnpu::python {
namespace {

struct Delegate {
  const char* name;    // torch_npu's _C name
  const char* module;  // where vnpu implements it
  const char* attr;
};

// The entry point calls module.attr with the caller's arguments.
constexpr Delegate kDelegates[] = {
    {"_npu_init", "torch_npu.npu", "_lazy_init"},
    {"_npu_synchronize", "torch_npu.npu", "synchronize"},
    {"_npu_setDevice", "torch_npu.npu", "set_device"},
    {"_npu_getDevice", "torch_npu.npu", "current_device"},
    {"_npu_canDeviceAccessPeer", "torch_npu.npu", "can_device_access_peer"},
    {"_npu_getDeviceUtilizationRate", "torch_npu.npu", "utilization"},
    {"_npu_stopDevice", "torch_npu.npu._reliability", "stop_device"},
    {"_npu_restart_device", "torch_npu.npu._reliability", "restart_device"},
    {"_npu_check_uce_in_memory", "torch_npu.npu._reliability", "check_uce_in_memory"},
    {"_npu_get_uce_addr", "torch_npu.npu._reliability", "_uce_addresses"},
    {"_npu_stress_detect", "torch_npu.npu._reliability", "stress_detect"},
    {"_aclop_start_dump", "torch_npu.npu._op_info_dump", "start"},
    {"_aclop_stop_dump", "torch_npu.npu._op_info_dump", "stop"},
    {"_aclnn_reselect_static_kernel", "torch_npu.npu._op_info_dump", "reselect_static_kernels"},
    {"_npu_set_op_timeout_ms", "torch_npu.npu._reliability", "set_op_timeout_ms"},
    {"_npu_isCurrentStreamCapturing", "torch_npu.npu", "is_current_stream_capturing"},
    {"_npu_eraseStream", "torch_npu", "erase_stream"},
    {"_npu_emptyCache", "torch_npu.npu", "empty_cache"},
    {"_npu_memoryStats", "torch_npu.npu", "memory_stats_as_nested_dict"},
    {"_npu_resetAccumulatedMemoryStats", "torch_npu.npu", "reset_accumulated_memory_stats"},
    {"_npu_resetPeakMemoryStats", "torch_npu.npu", "reset_peak_memory_stats"},
    {"_npu_memorySnapshot", "torch_npu.npu.memory", "_snapshot"},
    {"_npu_saveDevMemUsageInfo", "torch_npu.npu._oom_snapshot", "save_device_memory_usage"},
    {"_npu_setMemoryFraction", "torch_npu.npu", "set_per_process_memory_fraction"},
    {"_npu_ipc_collect", "torch_npu.npu", "ipc_collect"},
    {"_npu_emptyVirtAddrCache", "torch_npu.npu.memory", "empty_virt_addr_cache"},
    {"_npu_initDump", "torch_npu.npu", "init_dump"},
    {"_npu_setDump", "torch_npu.npu", "set_dump"},
    {"_npu_finalizeDump", "torch_npu.npu", "finalize_dump"},
    {"_npu_is_bf16_supported", "torch_npu.npu", "is_bf16_supported"},
    {"_npu_is_support_inf_nan", "torch_npu.npu._overflow", "is_support_inf_nan"},
    {"_npu_is_jit_compile_false", "torch_npu.npu", "is_jit_compile_false"},
    {"_get_cann_version", "torch_npu.npu.utils", "get_cann_version"},
    {"_is_gte_cann_version", "torch_npu.npu.utils", "_is_gte_cann_version"},
    {"_npu_set_deterministic_level", "torch_npu.npu.deterministic", "set_deterministic_level"},
    {"_npu_get_deterministic_level", "torch_npu.npu.deterministic", "get_deterministic_level"},
    {"_npu_set_device_res_limit", "torch_npu.npu.npu_config", "_set_device_res_limit"},
    {"_npu_get_device_res_limit", "torch_npu.npu.npu_config", "_get_device_res_limit"},
    {"_npu_reset_device_res_limit", "torch_npu.npu.npu_config", "_reset_device_res_limit"},
    {"_npu_set_stream_res_limit", "torch_npu.npu.npu_config", "_set_stream_res_limit"},
    {"_npu_get_stream_res_limit", "torch_npu.npu.npu_config", "_get_stream_res_limit"},
    {"_npu_reset_stream_res_limit", "torch_npu.npu.npu_config", "_reset_stream_res_limit"},
    {"_enable_overflow_npu", "torch_npu.npu._overflow", "_arm"},
    {"_check_overflow_npu", "torch_npu.npu._overflow", "float_status"},
    {"_clear_overflow_npu", "torch_npu.npu._overflow", "clear_float_status"},
    {"_npu_set_thread_affinity", "torch_npu.utils.affinity", "_bind_core_range"},
    {"_npu_reset_thread_affinity", "torch_npu.utils.affinity", "reset_thread_affinity"},
};

}  // namespace

py::tuple stream_parts(const c10::Stream& s) {
  return py::make_tuple(s.id(), s.device_index(), static_cast<int>(s.device_type()));
}

void bind_runtime_entry_points(py::module& m) {
  for (const Delegate& d : kDelegates) {
    m.def(d.name, [module = d.module, attr = d.attr](py::args args, py::kwargs kwargs) {
      return py::module_::import(module).attr(attr)(*args, **kwargs);
    });
  }
  m.def("_npu_get_soc_version", [] { return vnpu::soc_profile().version; });
  m.def("_npu_set_fft_plan_cache_max_size", &vnpu::set_fft_plan_cache_max_size);
  m.def("_npu_get_fft_plan_cache_max_size", &vnpu::fft_plan_cache_max_size);
  m.def("_npu_get_fft_plan_cache_size", &vnpu::fft_plan_cache_size);
  m.def("_npu_clear_fft_plan_cache", &vnpu::clear_fft_plan_cache);
  // the current device without initialising the runtime (torch_npu: aclrtGetDevice's answer)
  m.def("_npu_getLocalDevice", [] { return static_cast<int>(vnpu::current_device()); });
  m.def("_npu_getDeviceWithoutSet", [] { return static_cast<int>(vnpu::current_device()); });
  m.def("_npu_maybeExchangeDevice",
        [](int d) { return d < 0 ? -1 : static_cast<int>(vnpu::exchange_device(static_cast<c10::DeviceIndex>(d))); });
  m.def("_npu_getCurrentStream",
        [](int d) { return stream_parts(vnpu::current_stream(static_cast<c10::DeviceIndex>(d))); });
  m.def("_npu_getDefaultStream",
        [](int d) { return stream_parts(vnpu::default_stream(static_cast<c10::DeviceIndex>(d))); });
  m.def(
      "_npu_setStream",
      [](int64_t stream_id, int64_t device_index, int64_t device_type) {
        vnpu::exchange_stream(vnpu::stream_from_parts(stream_id, device_index, device_type));
      },
      py::arg("stream_id") = 0, py::arg("device_index") = 0, py::arg("device_type") = 0);
  m.def("_npu_set_sync_debug_mode", &vnpu::set_sync_debug_mode);
  m.def("_npu_get_sync_debug_mode", &vnpu::sync_debug_mode);
  // the model state the hccl backend's silent check reads (distributed/SilentCheck.h)
  m.def("_npu_set_module_train_state", [](const py::object& state) {
    TORCH_CHECK(py::isinstance<py::str>(state), "invalid value of train_state, train_state must string",
                vnpu::error_suffix(vnpu::SubModule::kPta, vnpu::kErrParam, "invalid parameter"));
    vnpu::set_module_train_state(state.cast<std::string>());
  });
  m.def("_npu_set_call_state", [](const py::object& state) {
    TORCH_CHECK(py::isinstance<py::str>(state), "invalid value of call_state, call_state must string",
                vnpu::error_suffix(vnpu::SubModule::kPta, vnpu::kErrParam, "invalid parameter"));
    vnpu::set_call_state(state.cast<std::string>());
  });
  // NPU_ASD_UPPER_THRESH and NPU_ASD_SIGMA_THRESH as the silent checks use them: ((l1, l2), (l1, l2))
  m.def("_silent_check_thresholds",
        [] { return py::make_tuple(vnpu::silent_check_upper_thresholds(), vnpu::silent_check_sigma_thresholds()); });
  // vnpu's caching allocator is the only backend (PYTORCH_NPU_ALLOC_CONF selects no other)
  m.def("_npu_getAllocatorBackend", [] { return std::string("native"); });
}

}  // namespace vnpu::python
