"""One profiling session's raw record: what the C++ core and PyTorch's CPU profiler recorded, kept in
`FRAMEWORK/vnpu_profiler_data.json` of the `..._ascend_pt` directory so that `analyse()` can parse it
again, and the helpers the writers share (operator type, the core Ascend would run it on).

Activities are dicts from `_C._activity_stop()`; memory events are tuples
(ptr, bytes, allocated, reserved, active, device, stream, time_ns, thread, correlation) from
`_C._profiler_memory_stop()`;
host events are dicts from host_activity.HostRecorder; steps are (number, start_ns, end_ns); mstx holds the
marks and finished ranges of torch_npu.npu.mstx (with their domains) recorded in the window.
"""

import json
import os

from torch_npu.profiler.timeline import owning_intervals

__all__ = ["RAW_FILE", "save", "load", "prepare", "op_type", "core_of", "cann_type", "CUBE_OPS"]

RAW_FILE = os.path.join("FRAMEWORK", "vnpu_profiler_data.json")
_VERSION = 1
CUBE_OPS = (
    "mm",
    "bmm",
    "addmm",
    "baddbmm",
    "addbmm",
    "matmul",
    "linear",
    "convolution",
    "_convolution",
    "convolution_backward",
    "_scaled_dot_product_flash_attention_for_cpu",
    "npu_fusion_attention",
    "npu_fusion_attention_grad",
    "npu_grouped_matmul",
    "npu_prompt_flash_attention",
    "npu_incre_flash_attention",
    "npu_fused_infer_attention_score",
)


def op_type(name):
    """ "aten::add.Tensor" -> "add"."""
    return name.split("::")[-1].split(".")[0]


# The CANN operator types Ascend runs the cube operators as (kernel_details' Type), which tools classify by
_CANN_TYPES = {
    "mm": "MatMulV2",
    "addmm": "MatMulV2",
    "matmul": "MatMulV2",
    "linear": "MatMulV2",
    "bmm": "BatchMatMulV2",
    "baddbmm": "BatchMatMulV2",
    "addbmm": "BatchMatMulV2",
    "convolution": "Conv2D",
    "_convolution": "Conv2D",
    "convolution_backward": "Conv2DBackpropInput",
    "_scaled_dot_product_flash_attention_for_cpu": "FlashAttentionScore",
    "npu_fusion_attention": "FlashAttentionScore",
    "npu_fusion_attention_grad": "FlashAttentionScoreGrad",
    "npu_prompt_flash_attention": "PromptFlashAttention",
    "npu_incre_flash_attention": "IncreFlashAttention",
    "npu_fused_infer_attention_score": "FusedInferAttentionScore",
    "npu_grouped_matmul": "GroupedMatmul",
}


def cann_type(name):
    """kernel_details' Type of an operator: the CANN type of a cube operator ("MatMulV2"), else its op type."""
    short = op_type(name)
    return _CANN_TYPES.get(short, short)


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


def _parents(session):
    """For each activity, the index in host_events of the host operator that issued it, or None."""
    host = session["host_events"]
    cpu_ops = [i for i, e in enumerate(host) if e["cat"] == "cpu_op"]
    owners = owning_intervals(
        [host[i] for i in cpu_ops],
        [(a["thread"], a["start_ns"], a.get("correlation", 0)) for a in session["activities"]],
    )
    return [cpu_ops[k] if k is not None else None for k in owners]


def _align_clocks(session, parents):
    """PyTorch stamps host events with its own clock (converted to UNIX time); device activity, memory events,
    step boundaries, collectives and runtime calls carry the steady clock plus an offset taken at start. Shift
    the whole steady side (so its events keep their order) by the smallest amount that puts every kernel inside
    the host operator that issued it, when such a shift exists."""
    host = session["host_events"]
    lowest, highest = None, None
    for a, p in zip(session["activities"], parents):
        if p is not None:
            low, high = host[p]["start_ns"] - a["start_ns"], host[p]["end_ns"] - a["end_ns"]
            lowest = low if lowest is None else max(lowest, low)
            highest = high if highest is None else min(highest, high)
    if lowest is None or lowest > highest or lowest <= 0 <= highest:
        return
    shift = lowest if lowest > 0 else highest
    for a in session["activities"]:
        a["start_ns"] += shift
        a["end_ns"] += shift
    session["memory"] = [m[:7] + (m[7] + shift,) + m[8:] for m in session["memory"]]
    session["steps"] = [(number, start + shift, end + shift) for number, start, end in session["steps"]]
    for c in session.get("collectives", []):
        c["start_ns"] += shift
        c["end_ns"] += shift
    session["runtime_api"] = [
        (api, start + shift, end + shift, *rest) for api, start, end, *rest in session.get("runtime_api", [])
    ]
    for record in session.get("mstx", []):
        for key in ("ns", "start_ns", "end_ns"):
            if key in record:
                record[key] += shift


def prepare(session, align_clocks=False):
    """Adds kernel_parents: for each activity, the index in host_events of the host operator that issued it.
    align_clocks (for a freshly recorded session) first moves the device side onto the host clock."""
    parents = _parents(session)
    if align_clocks:
        _align_clocks(session, parents)  # correlation-linked parents stay the same after the shift
    session["kernel_parents"] = parents
    return session
