"""Operator data dumps (torch_npu.npu.init_dump / set_dump / finalize_dump).

The config file is ACL's dump JSON::

    {"dump": {"dump_path": "/tmp/dump", "dump_mode": "all",
              "dump_list": [{"model_name": "...", "layer": ["aten::mm", "aten::add.Tensor"]}]}}

While dumping, every npu operator (or only those named in the ``layer`` lists, when any are
given) writes its inputs and/or outputs (``dump_mode``: all, input, output) as .npy files to
``<dump_path>/<YYYYmmddHHMMSS>/<device_id>/<index>.<operator>.<input|output>.<n>.npy`` and a line
to ``dump.jsonl`` in the same folder (operator, shapes, dtypes, files). bfloat16 tensors are
written as float32 (NumPy has no bfloat16).
"""

import json
import os
import threading
import time

import torch

from torch_npu import _C
from torch_npu.utils._error_code import ErrCode, pta_error

_lock = threading.Lock()
_state = {"config": None, "enabled": False, "hook": None, "root": None, "index": 0}


def _read_config(path):
    try:
        with open(path) as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read the dump config {path}: {e}" + pta_error(ErrCode.VALUE)) from e
    dump = cfg.get("dump") if isinstance(cfg, dict) else None
    if not isinstance(dump, dict) or "dump_path" not in dump:
        raise ValueError(f'dump config {path} needs {{"dump": {{"dump_path": ...}}}}' + pta_error(ErrCode.VALUE))
    mode = dump.get("dump_mode", "output")
    if mode not in ("all", "input", "output"):
        raise ValueError(f"dump_mode must be all, input or output, but got {mode}" + pta_error(ErrCode.VALUE))
    layers = set()
    for entry in dump.get("dump_list", []) or []:
        layers.update(entry.get("layer", []) or [])
    return {"path": dump["dump_path"], "mode": mode, "layers": layers}


def configure(path):
    """set_dump: the config applies from now on, also to a dump already running (its files go to the
    new dump_path)."""
    with _lock:
        _state["config"] = _read_config(path)
        _state["root"] = None
    _sync()


def enable():
    with _lock:
        _state["enabled"] = True
    _sync()


def disable():
    """finalize_dump: stops dumping and forgets the config, as aclmdlFinalizeDump does; the next
    init_dump needs a set_dump."""
    with _lock:
        _state["enabled"] = False
        _state["config"] = None
        _state["root"] = None
    _sync()


def _sync():
    with _lock:
        active = _state["enabled"] and _state["config"] is not None
        if active and _state["root"] is None:
            _state["root"] = os.path.join(_state["config"]["path"], time.strftime("%Y%m%d%H%M%S"))
            _state["index"] = 0
        if active and _state["hook"] is None:
            _state["hook"] = _C._add_python_op_hook(_on_op)
        elif not active and _state["hook"] is not None:
            _C._remove_op_hook(_state["hook"])
            _state["hook"] = None


def _to_numpy(t):
    t = t.detach()
    if t.device.type == "npu":
        t = t.cpu()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.resolve_conj().resolve_neg().numpy()


def _on_op(name, inputs, outputs, device, start_ns, end_ns):
    import numpy as np

    cfg = _state["config"]
    if cfg is None or (cfg["layers"] and name not in cfg["layers"] and name.split(".")[0] not in cfg["layers"]):
        return
    with _lock:
        index = _state["index"]
        _state["index"] += 1
    folder = os.path.join(_state["root"], str(device))
    os.makedirs(folder, exist_ok=True)
    record = {"index": index, "op": name, "device": device, "duration_us": (end_ns - start_ns) / 1000.0}
    for kind, tensors in (("input", inputs), ("output", outputs)):
        if cfg["mode"] not in ("all", kind):
            continue
        files = []
        for i, t in enumerate(tensors):
            if t is None or not isinstance(t, torch.Tensor) or t.layout != torch.strided:
                continue
            file = f"{index:06d}.{name}.{kind}.{i}.npy"
            np.save(os.path.join(folder, file), _to_numpy(t))
            files.append({"file": file, "shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")})
        record[kind + "s"] = files
    with open(os.path.join(folder, "dump.jsonl"), "a") as f:
        f.write(json.dumps(record) + "\n")
