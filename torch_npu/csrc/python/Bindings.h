// The groups of torch_npu._C's Python bindings (Module.cpp assembles them).
#pragma once

#include <pybind11/pybind11.h>

namespace vnpu::python {

void bind_ops(pybind11::module& m);
void bind_memory(pybind11::module& m);
void bind_distributed(pybind11::module& m);
void bind_tensors(pybind11::module& m);
void bind_plan(pybind11::module& m);
void bind_trace(pybind11::module& m);
void bind_graph_tree(pybind11::module& m);

}  // namespace vnpu::python
