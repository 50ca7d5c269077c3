"""An ESTIMATE of how long an operator would take on a real Ascend SoC: a roofline model per kernel row.

    time = max(FLOPs / peak FLOP/s, bytes moved / HBM bandwidth) + launch

- FLOPs are counted for the cube operators only (matmul family, convolution and its backward,
  attention), from their input and output shapes: 2*M*N*K for a matmul, 2 * output elements *
  (input channels / groups * kernel elements) for a convolution, twice that for its backward.
  Other operators are taken as memory-bound.
- Peak FLOP/s is the SoC profile's fp16 cube throughput; fp32 runs at a quarter of it and int8 at
  twice it (assumptions, as HF32 and int8 rates vary by SoC).
- Bytes moved = every input and output read or written once from HBM (no L2 reuse, no fusion).
- launch = 2 us per kernel for task launch and scheduling (an assumption).

Limits: shapes must have been recorded (record_shapes=True); it ignores caches, core occupancy for
small shapes, format conversions (TransData), overlap between streams and AI CPU kernels, so treat it
as a rough lower bound to compare operators against each other, not as a prediction.
"""

import math

__all__ = ["LAUNCH_US", "ITEM_SIZE", "soc_peaks", "estimate_us"]

LAUNCH_US = 2.0
ITEM_SIZE = {
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "c10::bfloat16": 2,
    "c10::half": 2,
    "int8": 1,
    "uint8": 1,
    "char": 1,
    "byte": 1,
    "bool": 1,
    "short": 2,
    "int16": 2,
    "int": 4,
    "int32": 4,
    "long": 8,
    "int64": 8,
    "complexfloat": 8,
    "complexdouble": 16,
}
_RATE = {2: 1.0, 4: 0.25, 1: 2.0, 8: 0.0625}
_MATMUL = {"mm", "matmul", "linear", "addmm", "bmm", "baddbmm", "addbmm"}
_CONV = {"convolution", "_convolution", "conv2d", "conv1d", "conv3d"}


def soc_peaks(name=None):
    """(SoC name, fp16 TFLOPS, HBM GB/s) of the named SoC (vnpu's SoC table), the active one by default."""
    from torch_npu import _C

    socs = {s["name"]: s for s in _C._known_socs()}
    soc = socs.get(name) or _C._soc_profile()
    return soc["name"], soc["fp16_tflops"], soc["hbm_gbps"]


def _parse_shapes(text):
    if not text:
        return []
    return [[int(d) for d in part.split(",") if d.strip()] for part in text.split(";")]


def _numel(shape):
    return math.prod(shape) if shape else 1


def _flops(op, ins, outs):
    if op in _MATMUL and len(ins) >= 2:
        a, b = (ins[-2], ins[-1]) if op in ("addmm", "baddbmm", "addbmm") else (ins[0], ins[1])
        if len(a) < 1 or len(b) < 1:
            return 0
        k = a[-1]
        n = b[0] if op == "linear" else b[-1]
        return 2 * _numel(a[:-1]) * k * n
    if op in _CONV and len(ins) >= 2 and outs:
        weight = ins[1]
        return 2 * _numel(outs[0]) * _numel(weight[1:])
    if op == "convolution_backward" and len(ins) >= 3:
        grad_out, weight = ins[0], ins[2]
        return 4 * _numel(grad_out) * _numel(weight[1:])
    if (
        op in ("_scaled_dot_product_flash_attention_for_cpu", "npu_fusion_attention", "scaled_dot_product_attention")
        and len(ins) >= 3
    ):
        q, k = ins[0], ins[1]
        return 4 * _numel(q[:-1]) * k[-2] * q[-1] if len(q) >= 2 and len(k) >= 2 else 0
    return 0


def estimate_us(op, input_shapes, input_dtypes, output_shapes, output_dtypes, tflops, hbm_gbps):
    """Estimated microseconds of one kernel on the SoC (see the module docstring), or None without shapes."""
    if not input_shapes and not output_shapes:
        return None
    ins, outs = _parse_shapes(input_shapes), _parse_shapes(output_shapes)
    in_types = (input_dtypes or "").split(";")
    out_types = (output_dtypes or "").split(";")
    nbytes = sum(_numel(s) * ITEM_SIZE.get(t.lower(), 4) for s, t in zip(ins, in_types))
    nbytes += sum(_numel(s) * ITEM_SIZE.get(t.lower(), 4) for s, t in zip(outs, out_types))
    flops = _flops(op, ins, outs)
    rate = _RATE.get(ITEM_SIZE.get(in_types[0].lower(), 4) if in_types and in_types[0] else 4, 0.25)
    compute_s = flops / (tflops * 1e12 * rate) if flops else 0.0
    memory_s = nbytes / (hbm_gbps * 1e9)
    return max(compute_s, memory_s) * 1e6 + LAUNCH_US
