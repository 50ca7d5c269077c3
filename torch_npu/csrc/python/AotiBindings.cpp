// torch_npu._C._aoti: the AOTInductor runner of npu models, which torch_npu exposes as
// torch._C._aoti.AOTIModelContainerRunnerNpu (torch._export.aot_load of an npu model uses it).
#include "python/Bindings.h"

#include "compile/AotiModelRunner.h"

#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

namespace py = pybind11;

namespace vnpu::python {

void bind_aoti(py::module& m) {
  auto aoti = m.def_submodule("_aoti", "AOTInductor runners of npu models");
  py::class_<NpuModelContainerRunner>(aoti, "AOTIModelContainerRunnerNpu")
      .def(py::init<const std::string&, size_t, const std::string&, bool>(), py::arg("model_so_path"),
           py::arg("num_models") = 1, py::arg("device_str") = "npu", py::arg("run_single_threaded") = false)
      .def(py::init([](const std::string& path, size_t num_models, const std::string& device,
                       const std::string& /*cubin_dir*/) {
             return std::make_unique<NpuModelContainerRunner>(path, num_models, device, false);
           }),
           py::arg("model_so_path"), py::arg("num_models"), py::arg("device_str"), py::arg("cubin_dir"))
      .def("run", &NpuModelContainerRunner::run, py::arg("inputs"), py::arg("stream_handle") = nullptr,
           py::call_guard<py::gil_scoped_release>())
      .def("get_call_spec", &NpuModelContainerRunner::get_call_spec)
      .def("get_constant_names_to_original_fqns", &NpuModelContainerRunner::getConstantNamesToOriginalFQNs)
      .def("get_constant_names_to_dtypes", &NpuModelContainerRunner::getConstantNamesToDtypes)
      .def("extract_constants_map", &NpuModelContainerRunner::npu_constants, py::arg("use_inactive"))
      .def("update_constant_buffer", &NpuModelContainerRunner::update_npu_constants, py::arg("tensor_map"),
           py::arg("use_inactive"), py::arg("validate_full_updates"), py::arg("user_managed") = false)
      .def("swap_constant_buffer", &NpuModelContainerRunner::swap_constant_buffer)
      .def("free_inactive_constant_buffer", &NpuModelContainerRunner::free_inactive_constant_buffer);
}

}  // namespace vnpu::python
