// torch_npu._C._activate_npu_trace(mode): the runtime's trace points (runtime/DeviceTrace.h) call
// torch_npu.utils._npu_trace._fire(point, first, second), which runs the callbacks registered there.
#include "python/Bindings.h"
#include "runtime/DeviceTrace.h"

#include <torch/csrc/utils/pybind.h>

namespace vnpu::python {
namespace {

void call_python(trace::Point point, uintptr_t first, uintptr_t second) {
#if PY_VERSION_HEX >= 0x030D0000
  const bool finalizing = Py_IsFinalizing();
#else
  const bool finalizing = _Py_IsFinalizing();
#endif
  if (!Py_IsInitialized() || finalizing) {  // memory freed while the interpreter shuts down
    return;
  }
  pybind11::gil_scoped_acquire gil;
  try {
    // Kept for the process's life: destroying it after the interpreter ended would touch freed Python state.
    static const auto* fire =
        new pybind11::object(pybind11::module::import("torch_npu.utils._npu_trace").attr("_fire"));
    (*fire)(static_cast<int>(point), first, second);
  } catch (pybind11::error_already_set& error) {
    // A trace point may run where raising is not allowed (a deleter); the callbacks report their own errors.
    error.discard_as_unraisable(__func__);
  }
}

}  // namespace

void bind_trace(pybind11::module& m) {
  m.def(
      "_activate_npu_trace", [](int /*mode*/) { trace::set_handler(trace::Listener::Sanitizer, &call_python); },
      pybind11::arg("mode") = 0);
  m.def("_deactivate_npu_trace", [] { trace::set_handler(trace::Listener::Sanitizer, nullptr); });
}

}  // namespace vnpu::python
