"""One profiling session's raw record: what the C++ core and PyTorch's CPU profiler recorded, kept in
`FRAMEWORK/vnpu_profiler_data.json` of the `..._ascend_pt` directory so that `analyse()` can parse it
again, and the helpers the writers share (operator type, the core Ascend would run it on).

Activities are dicts from `_C._activity_stop()`; memory events are tuples
(ptr, bytes, allocated, reserved, active, device, stream, time_ns, thread) from `_C._profiler_memory_stop()`;
host events are dicts from host_activity.HostRecorder; steps are (number, start_ns, end_ns).
"""
import json
import os

from torch_npu.profiler.timeline import innermost_enclosing

__all__ = ["RAW_FILE", "save", "load", "prepare", "op_type", "core_of", "CUBE_OPS"]

RAW_FILE = os.path.join("FRAMEWORK", "vnpu_profiler_data.json")
_VERSION = 1
CUBE_OPS = ("mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul", "linear", "convolution", "_convolution",
            "convolution_backward", "_scaled_dot_product_flash_attention_for_cpu", "npu_fusion_attention",
            "npu_fusion_attention_grad", "npu_grouped_matmul", "npu_prompt_flash_attention",
            "npu_incre_flash_attention", "npu_fused_infer_attention_score")


def op_type(name):
    """"aten::add.Tensor" -> "add"."""
    return name.split("::")[-1].split(".")[0]


def core_of(activity):
    """Where Ascend would run the operator: AI_CPU for a CPU fallback of the active operator-support
    profile, AI_CORE for the cube operators, AI_VECTOR_CORE otherwise."""
    if activity["cpu_fallback"]:
        return "AI_CPU"
    return "AI_CORE" if op_type(activity["name"]) in CUBE_OPS else "AI_VECTOR_CORE"


def save(path, session):
    raw = {k: v for k, v in session.items() if k != "kernel_parents"}
    raw["version"] = _VERSION
    target = os.path.join(path, RAW_FILE)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "w") as f:
        json.dump(raw, f, separators=(",", ":"))


def load(path):
    target = os.path.join(path, RAW_FILE)
    if not os.path.isfile(target):
        raise FileNotFoundError(f"{path} is not a vnpu profiling directory: {RAW_FILE} is missing")
    try:
        with open(target) as f:
            raw = json.load(f)
    except ValueError as e:
        raise ValueError(f"{target} is not valid profiling data: {e}") from None
    if not isinstance(raw, dict) or raw.get("version") != _VERSION:
        raise ValueError(f"{target} is not vnpu profiling data of version {_VERSION}")
    raw["steps"] = [tuple(s) for s in raw["steps"]]
    raw["memory"] = [tuple(m) for m in raw["memory"]]
    return prepare(raw)


def prepare(session):
    """Adds kernel_parents: for each activity, the index in host_events of the host operator that issued it."""
    host = session["host_events"]
    cpu_ops = [i for i, e in enumerate(host) if e["cat"] == "cpu_op"]
    found = innermost_enclosing([host[i] for i in cpu_ops],
                                [(a["thread"], a["start_ns"]) for a in session["activities"]])
    session["kernel_parents"] = [cpu_ops[k] if k is not None else None for k in found]
    return session
