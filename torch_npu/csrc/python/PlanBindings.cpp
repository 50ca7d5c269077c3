// Python bindings of planning mode (VNPU_PLAN=1): what torch_npu/npu/_plan.py reads and feeds.
#include "python/Bindings.h"

#include "plan/PlanMemory.h"
#include "plan/PlanMode.h"
#include "plan/PlanModules.h"
#include "runtime/HostMemory.h"

#include <pybind11/stl.h>

namespace py = pybind11;

namespace vnpu::python {

void bind_plan(py::module& m) {
  m.def("_plan_mode", &plan_mode, "Planning mode (VNPU_PLAN=1): shapes and memory only, no values");
  m.def(
      "_plan_ledger",
      [] {
        py::list rows;
        for (const auto& r : plan_ledger()) {
          rows.append(py::make_tuple(r.op, r.input_shapes, r.input_dtypes, r.output_shapes, r.output_dtypes, r.calls));
        }
        return rows;
      },
      "Planning mode's operators: (op, input shapes, input dtypes, output shapes, output dtypes, calls)");
  m.def(
      "_plan_memory",
      [] {
        py::dict devices;
        for (const auto& [device, d] : plan_memory()) {
          py::list biggest;
          for (const auto& b : d.biggest) {
            biggest.append(py::dict(py::arg("ptr") = b.ptr, py::arg("bytes") = b.bytes, py::arg("serial") = b.serial,
                                    py::arg("operator") = b.op, py::arg("module") = b.module));
          }
          py::list steps;
          for (const auto& s : d.steps) {
            steps.append(py::dict(py::arg("allocated_peak") = s.allocated, py::arg("reserved_peak") = s.reserved));
          }
          const auto& o = d.over_capacity;
          py::object over = py::none();
          if (o.events > 0) {
            over = py::dict(py::arg("events") = o.events, py::arg("requested") = o.requested,
                            py::arg("capacity") = o.capacity, py::arg("operator") = o.op, py::arg("module") = o.module,
                            py::arg("site") = o.site);
          }
          devices[py::int_(device)] =
              py::dict(py::arg("peak") = d.peak, py::arg("operator") = d.op, py::arg("module") = d.module,
                       py::arg("site") = d.site, py::arg("biggest") = biggest, py::arg("steps") = steps,
                       py::arg("over_capacity") = over);
        }
        return devices;
      },
      "Planning mode's memory per device: the allocated peak, what made it, the biggest blocks alive then, "
      "the peaks of every step, and where the card would have run out of memory (None if it did not)");
  m.def("_plan_enter_module", &plan_enter_module, "A module's forward starts (labels the memory it allocates)");
  m.def("_plan_exit_module", &plan_exit_module, "A module's forward ended");
  m.def("_plan_end_step", &end_plan_step, "A training step ended (an optimizer stepped)");
  m.def("_plan_block_serial", &plan_block_serial, "The allocation serial of the live block at an address (0: none)");
}

}  // namespace vnpu::python
