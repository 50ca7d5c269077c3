// torch_npu._C._distributed_c10d: the hccl backend class (distributed/ProcessGroupHCCL.h).
#include "python/Bindings.h"

#include "distributed/ProcessGroupHCCL.h"

#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

namespace py = pybind11;

namespace vnpu::python {

void bind_distributed(py::module& m) {
  auto c10d_module = m.def_submodule("_distributed_c10d", "torch_npu's c10d backends");
  py::class_<ProcessGroupHCCL, c10d::Backend, c10::intrusive_ptr<ProcessGroupHCCL>>(c10d_module, "ProcessGroupHCCL")
      .def(
          py::init([](const c10::intrusive_ptr<c10d::Backend>& transport, int rank, int size, const std::string& name) {
            return c10::make_intrusive<ProcessGroupHCCL>(transport, rank, size, name);
          }),
          py::arg("transport"), py::arg("rank"), py::arg("size"), py::arg("name") = "hccl",
          py::call_guard<py::gil_scoped_release>())
      .def(
          "get_hccl_comm_name", [](const ProcessGroupHCCL& self, int64_t /*rank*/) { return self.comm_name(); },
          py::arg("rank") = 0)
      .def(
          "_set_link",
          [](ProcessGroupHCCL& self, const c10::intrusive_ptr<c10d::Store>& store, double connect, double execute) {
            self.set_link({store, connect, execute, 0});
          },
          py::arg("store"), py::arg("connect_seconds"), py::arg("execute_seconds"))
      .def("_next_link",
           [](ProcessGroupHCCL& self) {
             auto& link = self.link();
             TORCH_CHECK(link.store, "this hccl group keeps no link to rebuild");
             return py::make_tuple(link.store, link.connect_seconds, link.execute_seconds, ++link.generation);
           })
      .def("_open_intra_host_link", &ProcessGroupHCCL::open_intra_host_link, py::arg("name"), py::arg("create"))
      .def("_unlink_intra_host_link", &ProcessGroupHCCL::unlink_intra_host_link)
      .def("_close_intra_host_link", &ProcessGroupHCCL::close_intra_host_link)
      .def_property_readonly("_uses_intra_host_link", &ProcessGroupHCCL::uses_intra_host_link)
      .def_property_readonly("_in_place_collectives", &ProcessGroupHCCL::in_place_collectives)
      .def("_replace_transport", &ProcessGroupHCCL::replace_transport, py::arg("transport"),
           py::call_guard<py::gil_scoped_release>())
      .def("_set_default_timeout", &ProcessGroupHCCL::setTimeout, py::arg("timeout"))
      .def("_add_ephemeral_timeout", &ProcessGroupHCCL::add_ephemeral_timeout, py::arg("timeout"));
}

}  // namespace vnpu::python
