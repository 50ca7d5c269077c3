"""Operator information files: what torch_npu._C._aclop_start_dump(path) / _aclop_stop_dump() (ACL's
aclopStartDumpArgs / aclopStopDumpArgs) leave.

Between the two calls every npu operator call is noted once per distinct signature (operator, input and
output dtypes, shapes and formats, attribute values), in C++ on the operator path. Stopping writes one JSON
file per signature into ``<path>/op_info_<pid>_<YYYYmmddHHMMSSffffff>_debug/`` — the folder torch_npu's
static-kernel compiler hands to CANN's ``op_compiler``::

    {"op_type": "MatMulV2", "op": "aten::mm",
     "inputs": [{"name": "self", "dtype": "float32", "shape": [4, 8], "format": "ND"}, ...],
     "outputs": [{"name": "result", "dtype": "float32", "shape": [4, 4], "format": "ND"}],
     "attrs": [{"name": "alpha", "value": 1}]}

``op_type`` is the CANN type the profiler reports the operator under. The field layout is vnpu's own (ACL
documents the content of its files, not their layout).
"""

import datetime
import json
import os
import threading

import torch

from torch_npu import _C
from torch_npu.npu._format import Format
from torch_npu.ops.storage_shapes import default_format
from torch_npu.utils._error_code import ErrCode, pta_error

__all__ = []

_lock = threading.Lock()
_session = {"path": None}


def start(path):
    """Starts noting operator calls; their files go under `path` (created when missing)."""
    if not isinstance(path, str):
        raise TypeError(f"dump path must be a str, but got {type(path).__name__}" + pta_error(ErrCode.TYPE))
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise RuntimeError(f"cannot create the operator dump path {path}: {e}" + pta_error(ErrCode.SYSCALL)) from e
    with _lock:
        _session["path"] = os.path.abspath(path)
        _C._op_info_dump_start()


def stop():
    """Stops noting and writes one file per distinct operator call; the folder written (None without a start)."""
    with _lock:
        path, _session["path"] = _session["path"], None
        calls = _C._op_info_dump_stop()
    if path is None:
        return None
    stamp = datetime.datetime.now().strftime("%Y%m%d%H%M%S%f")
    folder = os.path.join(path, f"op_info_{os.getpid()}_{stamp}_debug")
    os.makedirs(folder, exist_ok=True)
    from torch_npu.profiler.session import cann_type

    for index, call in enumerate(calls):
        record = {
            "op_type": cann_type(call["op"]),
            "op": call["op"],
            "inputs": [_tensor(t) for t in call["inputs"]],
            "outputs": [_tensor(t) for t in call["outputs"]],
            "attrs": [{"name": name, "value": _attr(value)} for name, value in call["attrs"]],
        }
        with open(os.path.join(folder, f"{index:05d}_{record['op_type']}.json"), "w") as f:
            json.dump(record, f, indent=1)
    return folder


def reselect_static_kernels():
    """torch_npu._C._aclnn_reselect_static_kernel: makes aclnn pick up static kernel packages installed since
    start-up. vnpu installs none (it runs PyTorch's CPU kernels, and CANN's op_compiler builds packages for a
    card), so every operator keeps the kernel it has."""
    return None


def _tensor(info):
    name, dtype, shape, fmt = info
    fmt = default_format(len(shape)) if fmt < 0 else Format(fmt)
    return {"name": name, "dtype": str(dtype).replace("torch.", ""), "shape": list(shape), "format": fmt.name}


def _attr(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_attr(v) for v in value]
    if isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return str(value).replace("torch.", "")
    return str(value)
