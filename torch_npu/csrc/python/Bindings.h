// The groups of torch_npu._C's Python bindings (Module.cpp assembles them).
#pragma once

#include <c10/core/Stream.h>
#include <pybind11/pybind11.h>

namespace vnpu::python {

void bind_ops(pybind11::module& m);
void bind_memory(pybind11::module& m);
void bind_distributed(pybind11::module& m);
void bind_tensors(pybind11::module& m);
void bind_plan(pybind11::module& m);
void bind_trace(pybind11::module& m);
void bind_graph_tree(pybind11::module& m);
void bind_runtime_entry_points(pybind11::module& m);
void bind_aoti(pybind11::module& m);

// A stream as Python sees it: (stream_id, device_index, device_type).
pybind11::tuple stream_parts(const c10::Stream& s);

}  // namespace vnpu::python
