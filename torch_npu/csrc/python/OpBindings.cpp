// Python bindings of the operator layer: the redirect, operator hooks (dumps, overflow checks),
// precision emulation, NPU graphs and private formats.
#include "python/Bindings.h"

#include "aten/CpuFallback.h"
#include "aten/CpuOperandError.h"
#include "aten/HostSync.h"
#include "aten/OpHooks.h"
#include "aten/Redirect.h"
#include "aten/TensorMapping.h"
#include "compile/HostCompiledCall.h"
#include "graphs/GraphCapture.h"
#include "precision/PrecisionEmulation.h"
#include "precision/StrongConsistency.h"
#include "profiler/ActivityRecorder.h"
#include "profiler/CollectiveRecorder.h"
#include "profiler/OperatorInfoDump.h"
#include "profiler/OperatorTotals.h"
#include "profiler/RuntimeApiRecorder.h"
#include "runtime/CachingAllocator.h"
#include "runtime/HostMemory.h"
#include "runtime/Options.h"
#include "runtime/Stream.h"
#include "vision/VisionKernels.h"

#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>

#include <memory>

namespace py = pybind11;

namespace vnpu::python {
namespace {

std::vector<at::Tensor> tensors_of(const std::vector<c10::IValue>& values) {
  std::vector<at::Tensor> out;
  for (const auto& v : values) {
    if (v.isTensor()) {
      out.push_back(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) {
        out.push_back(t);
      }
    }
  }
  return out;
}

// Calls a Python function after every npu operator: fn(op_name, input_tensors, output_tensors,
// device, start_ns, end_ns). Operators the function itself runs are not reported (no recursion).
class PythonOpHook final : public OpHook {
 public:
  explicit PythonOpHook(py::object fn) : fn_(std::move(fn)) {}
  ~PythonOpHook() override {
    py::gil_scoped_acquire gil;
    fn_ = py::object();
  }
  void after(const OpCall& call) override {
    thread_local bool inside = false;
    if (inside) {
      return;
    }
    inside = true;
    try {
      py::gil_scoped_acquire gil;
      fn_(call.facts.name, tensors_of(call.inputs), tensors_of(call.outputs), static_cast<int>(call.device),
          call.start_ns, call.end_ns);
    } catch (...) {
      inside = false;
      throw;
    }
    inside = false;
  }

 private:
  py::object fn_;
};

}  // namespace

namespace {

// A Python callable name -> str as a C++ function, called with the GIL (and released with it).
std::function<std::string(const std::string&)> text_of_name(py::object callable) {
  auto shared = std::shared_ptr<py::object>(new py::object(std::move(callable)), [](py::object* held) {
    py::gil_scoped_acquire gil;
    delete held;
  });
  return [shared](const std::string& name) {
    py::gil_scoped_acquire gil;
    return (*shared)(name).cast<std::string>();
  };
}

}  // namespace

void bind_ops(py::module& m) {
  m.def("_register_redirects", &register_redirects);
  m.def("_aten_operator_kernels", &aten_operator_kernels);
  // handler(name) -> "" or an error message; called (with the GIL) on each CPU-fallback operator call.
  m.def("_set_cpu_fallback_operators", [](const std::map<std::string, std::string>& reports, py::object handler) {
    set_cpu_fallback_operators(reports, handler.is_none() ? CpuFallbackHandler() : text_of_name(std::move(handler)));
  });
  // message(op) -> torch_npu's text for a CPU operand of `op`, or "" (aten/CpuOperandError.h); error path only.
  m.def("_set_cpu_operand_message",
        [](py::object message) { set_cpu_operand_message(text_of_name(std::move(message))); });
  m.def("_redirect_calls", &redirect_calls);
  m.def("_redirect_aliases_built", &redirect_aliases_built);
  m.def("_define_torchvision_operators", &vision::define_torchvision_operators,
        "Defines torchvision's operators with vnpu's CPU kernels (for a torchvision whose extension cannot load)");
  // The profiler's device activity (aten/ActivityRecorder.h): start, then stop -> list of dicts.
  m.def("_activity_start", &start_activity_recording, py::arg("record_shapes") = false);
  m.def("_activity_recording", &activity_recording);
  m.def("_activity_stop", [] {
    auto meta = [](const std::vector<TensorMeta>& tensors) {
      py::list out;
      for (const auto& t : tensors) {
        out.append(py::make_tuple(t.shape, t.dtype, t.format));
      }
      return out;
    };
    py::list out;
    for (const auto& a : stop_activity_recording()) {
      py::dict d;
      d["name"] = a.name;
      d["start_ns"] = a.start_ns;
      d["end_ns"] = a.end_ns;
      d["device"] = a.device;
      d["stream"] = a.stream;
      d["thread"] = a.thread;
      d["cpu_fallback"] = a.cpu_fallback;
      d["memcpy"] = a.memcpy;
      d["correlation"] = a.correlation;
      d["inputs"] = meta(a.inputs);
      d["outputs"] = meta(a.outputs);
      out.append(d);
    }
    return out;
  });
  // The hccl backend's collectives (profiler/CollectiveRecorder.h), recorded with the device activity.
  m.def("_collective_start", &start_collective_recording);
  m.def("_collective_stop", [] {
    py::list out;
    for (const auto& c : stop_collective_recording()) {
      const int64_t end = c->end_ns.load();
      if (end == 0) {
        continue;  // never completed while recording
      }
      py::dict d;
      d["name"] = c->name;
      d["kind"] = c->kind;
      d["group"] = c->group;
      d["rank"] = c->rank;
      d["size"] = c->size;
      d["peer"] = c->peer;
      d["device"] = c->device;
      d["bytes"] = c->bytes;
      d["count"] = c->count;
      d["dtype"] = c->dtype;
      d["start_ns"] = c->start_ns;
      d["end_ns"] = end;
      out.append(d);
    }
    return out;
  });
  // The runtime calls of the session (profiler/RuntimeApiRecorder.h): start, then stop -> list of tuples
  // (api name, start_ns, end_ns, thread, device).
  m.def("_runtime_api_start", &start_runtime_api_recording);
  m.def("_runtime_api_stop", [] {
    py::list out;
    for (const auto& c : stop_runtime_api_recording()) {
      out.append(py::make_tuple(c.name, c.start_ns, c.end_ns, c.thread, c.device));
    }
    return out;
  });
  // Calls and host nanoseconds per operator (aten/OperatorTotals.h), for `vnpu run`.
  m.def("_op_totals_start", &start_operator_totals);
  m.def("_op_totals_stop", &stop_operator_totals);
  // The distinct operator calls of an operator-information session (profiler/OperatorInfoDump.h): start, then
  // stop -> list of dicts (op, inputs, outputs: [(name, dtype, shape, format)], attrs: [(name, value)]).
  m.def("_op_info_dump_start", &start_operator_info_dump);
  m.def("_op_info_dump_active", &operator_info_dump_active);
  m.def("_op_info_dump_stop", [] {
    auto tensors = [](const std::vector<OperatorTensorInfo>& infos) {
      py::list out;
      for (const auto& t : infos) {
        out.append(py::make_tuple(t.name, t.dtype, t.shape, t.format));
      }
      return out;
    };
    py::list out;
    for (const auto& info : stop_operator_info_dump()) {
      py::dict d;
      d["op"] = info.op;
      d["inputs"] = tensors(info.inputs);
      d["outputs"] = tensors(info.outputs);
      py::list attrs;
      for (const auto& [name, value] : info.attrs) {
        attrs.append(py::make_tuple(name, torch::jit::toPyObject(value)));
      }
      d["attrs"] = attrs;
      out.append(d);
    }
    return out;
  });
  m.def("_cpu_alias", &owning_cpu_alias, "CPU tensor over an npu tensor's memory (keeps it alive)");
  m.def(
      "_npu_alias_of_host",
      [](const at::Tensor& cpu, int device) { return npu_alias_of_host(cpu, static_cast<c10::DeviceIndex>(device)); },
      "npu tensor over a CPU tensor's memory (keeps it alive)");

  py::class_<OpHook, std::shared_ptr<OpHook>>(m, "_OpHook");
  m.def("_add_python_op_hook", [](py::object fn) {
    std::shared_ptr<OpHook> hook = std::make_shared<PythonOpHook>(std::move(fn));
    add_op_hook(hook);
    return hook;
  });
  m.def("_remove_op_hook", [](const std::shared_ptr<OpHook>& hook) { remove_op_hook(hook); });

  m.def("_npu_setOption", [](const std::map<std::string, std::string>& options) {
    set_options(options);
    update_precision_from_options();
  });
  m.def("_npu_getOption", [](const std::string& key) -> py::object {
    auto value = get_option(key);
    return value ? py::object(py::bytes(*value)) : py::object(py::none());
  });
  m.def("_precision_settings", [] {
    const auto s = precision_settings();
    py::dict d;
    d["emulate"] = s.emulate;
    d["matmul_cube_math_type"] = s.matmul_cube_math_type;
    d["conv_hf32"] = s.conv_hf32;
    d["fp32_to_fp16"] = s.fp32_to_fp16;
    return d;
  });
  m.def("_update_precision_from_options", &update_precision_from_options);
  m.def("_set_strong_consistency", &set_strong_consistency);
  m.def("_strong_consistency", &strong_consistency);
  m.def("_round_to_hf32", &round_to_hf32);

  py::class_<GraphRecording, std::shared_ptr<GraphRecording>>(m, "_GraphRecording")
      .def(py::init([] { return std::make_shared<GraphRecording>(); }))
      .def("begin", [](GraphRecording& g, int64_t stream_id,
                       int device) { g.begin(make_stream(stream_id, static_cast<c10::DeviceIndex>(device))); })
      .def("end", &GraphRecording::end)
      .def("replay", &GraphRecording::replay, py::call_guard<py::gil_scoped_release>())
      .def(
          "replay_with_inputs",
          [](GraphRecording& g, py::list buffers, py::sequence inputs, py::bytes static_mask) {
            // A compiled function's replay: fresh inputs are copied into the graph's own input buffers
            // (static ones are read where they are), then the graph runs.
            const std::string_view is_static = static_mask;
            const size_t n = std::min(buffers.size(), inputs.size());
            for (size_t i = 0; i < n; ++i) {
              PyObject* buffer = buffers[i].ptr();
              py::object input_ref = inputs[i];
              PyObject* input = input_ref.ptr();
              if ((i < is_static.size() && is_static[i]) || !THPVariable_Check(buffer) || !THPVariable_Check(input)) {
                continue;
              }
              const at::Tensor& dst = THPVariable_Unpack(buffer);
              const at::Tensor& src = THPVariable_Unpack(input);
              if (dst.data_ptr() != src.data_ptr()) {
                py::gil_scoped_release no_gil;
                const_cast<at::Tensor&>(dst).copy_(src);
              }
            }
            py::gil_scoped_release no_gil;
            g.replay();
          },
          "Copies the non-static inputs into the graph's input buffers, then replays")
      .def("reset", &GraphRecording::reset)
      .def("size", &GraphRecording::size)
      .def("capturing", &GraphRecording::capturing)
      .def("describe", &GraphRecording::describe)
      .def("records_of", &GraphRecording::records_of)
      .def("splice", &GraphRecording::splice)
      .def("replace", &GraphRecording::replace)
      .def("update_int_list", [](GraphRecording& g, size_t record, const std::string& name,
                                 const std::vector<int64_t>& value) { g.update_argument(record, name, value); })
      .def("update_int", [](GraphRecording& g, size_t record, const std::string& name,
                            int64_t value) { g.update_argument(record, name, value); })
      .def("update_float", [](GraphRecording& g, size_t record, const std::string& name, double value) {
        g.update_argument(record, name, value);
      });
  m.def(
      "_run_on_host",
      [](py::function fn, py::list inputs, int device, const std::vector<bool>& npu_results) {
        HostCompiledCall call(static_cast<c10::DeviceIndex>(device));
        py::list boxed;
        for (size_t i = 0; i < inputs.size(); ++i) {
          PyObject* item = inputs[i].ptr();
          if (THPVariable_Check(item)) {
            boxed.append(py::reinterpret_steal<py::object>(
                THPVariable_Wrap(call.input(THPVariable_Unpack(item), static_cast<int>(i)))));
          } else {
            boxed.append(inputs[i]);
          }
        }
        py::object out;
        {
          HostCompiledCall::Running running(call.device());
          out = fn(boxed);
        }
        call.finish_inputs(inputs.size());
        py::list results;
        size_t i = 0;
        for (const auto& item : out) {
          if (i < npu_results.size() && npu_results[i] && THPVariable_Check(item.ptr())) {
            results.append(
                py::reinterpret_steal<py::object>(THPVariable_Wrap(call.result(THPVariable_Unpack(item.ptr())))));
          } else {
            results.append(item);
          }
          ++i;
        }
        return results;
      },
      "Runs host-compiled code for an npu graph: fn(boxed CPU aliases) under the device's memory pools; "
      "results flagged in npu_results come back as npu tensors");
  m.def("_in_host_compiled_region", &HostCompiledRegion::active);
  m.def(
      "_graph_input_key",
      [](py::sequence inputs, py::bytes static_mask) {
        // What decides whether a captured NPU graph can serve a call: the layout of every tensor input,
        // and the memory of the static ones (a graph reads those where they are). static_mask holds one
        // byte per input, nonzero for a static one.
        const std::string_view is_static = static_mask;
        std::vector<int64_t> key;
        key.reserve(inputs.size() * 8);
        for (size_t i = 0; i < inputs.size(); ++i) {
          py::object item_ref = inputs[i];
          PyObject* item = item_ref.ptr();
          if (THPVariable_Check(item)) {
            const at::Tensor& t = THPVariable_Unpack(item);
            key.push_back(t.dim());
            key.insert(key.end(), t.sizes().begin(), t.sizes().end());
            key.insert(key.end(), t.strides().begin(), t.strides().end());
            key.push_back(static_cast<int64_t>(t.scalar_type()));
            key.push_back(static_cast<int64_t>(t.device().type()) * 1024 + t.device().index());
            key.push_back(i < is_static.size() && is_static[i] ? reinterpret_cast<int64_t>(t.data_ptr()) : 0);
          } else if (PyLong_Check(item)) {
            key.push_back(-1);
            key.push_back(PyLong_AsLongLong(item));
          } else {
            key.push_back(-2);
            key.push_back(static_cast<int64_t>(PyObject_Hash(item)));
          }
        }
        return py::bytes(reinterpret_cast<const char*>(key.data()), key.size() * sizeof(int64_t));
      },
      "A bytes key of the inputs' layouts (and the static inputs' memory) for NPU graph replay");
  m.def("_current_stream_capturing", &current_stream_capturing);
  m.def(
      "_graph_record_host_kernel",
      [](const std::string& name, py::object kernel, std::optional<std::vector<at::Tensor>> reads,
         std::optional<std::vector<at::Tensor>> writes) {
        // The graph may outlive this call and is replayed without the GIL: hold the callable
        // through a deleter that takes the GIL, and take it to call.
        std::shared_ptr<py::object> held(new py::object(std::move(kernel)), [](py::object* o) {
          py::gil_scoped_acquire gil;
          delete o;
        });
        const bool takes_tensors = reads.has_value() || writes.has_value();
        auto values = [](const std::optional<std::vector<at::Tensor>>& tensors) {
          return tensors ? std::vector<c10::IValue>(tensors->begin(), tensors->end()) : std::vector<c10::IValue>{};
        };
        auto call = [held, takes_tensors](const std::vector<c10::IValue>& in, const std::vector<c10::IValue>& out) {
          py::gil_scoped_acquire gil;
          if (!takes_tensors) {
            (*held)();
            return;
          }
          py::list reads_now, writes_now;
          for (const auto& v : in) {
            reads_now.append(v.toTensor());
          }
          for (const auto& v : out) {
            writes_now.append(v.toTensor());
          }
          (*held)(reads_now, writes_now);
        };
        return record_host_kernel(name, call, values(reads), values(writes));
      },
      py::arg("name"), py::arg("kernel"), py::arg("reads") = py::none(), py::arg("writes") = py::none(),
      "Adds a host kernel (a Python callable) to the NPU graph capturing the current stream; False if none "
      "captures it. With `reads` / `writes`, the graph keeps those tensors as an operator's (its pool's by "
      "address) and calls kernel(reads, writes) with them at each replay.");
  m.def("_set_sync_debug_mode", &set_sync_debug_mode);
  m.def("_get_sync_debug_mode", &sync_debug_mode);
}

}  // namespace vnpu::python
