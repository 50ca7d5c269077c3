"""TORCH_NPU_LOGS: per-module logging of torch_npu.

TORCH_NPU_LOGS is a comma list of modules (memory, dispatch, dispatch_time, silent, recovery,
op_plugin, shmem, env, acl, aclgraph, all); a bare name logs at INFO, "+name" at DEBUG and "-name" at
ERROR ("memory,+dispatch,-all"). TORCH_NPU_LOGS_FILTER keeps lines containing every "+word" and
drops lines containing any "-word". Loggers are named torch_npu.<module> and write to stderr.

dispatch at DEBUG logs every npu operator (name, device, duration) through an operator hook;
dispatch_time at INFO logs operators slower than 1 ms.
"""

import logging
import os

from torch_npu.utils._error_code import ErrCode, pta_error

MODULES = ("memory", "dispatch", "dispatch_time", "silent", "recovery", "op_plugin", "shmem", "env", "acl", "aclgraph")
_LEVELS = {"": logging.INFO, "+": logging.DEBUG, "-": logging.ERROR}
_dispatch_hook = None


def get_logger(module):
    return logging.getLogger("torch_npu." + module)


def parse_spec(spec):
    """'memory,+dispatch,-all' -> {module: level}; raises ValueError on unknown modules."""
    levels = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        prefix = item[0] if item[0] in "+-" else ""
        name = item[len(prefix) :]
        if name == "all":
            for module in MODULES:
                levels.setdefault(module, _LEVELS[prefix])
            continue
        if name not in MODULES:
            raise ValueError(
                f"TORCH_NPU_LOGS: unknown module {name!r}; known modules: {', '.join(MODULES)}, all"
                + pta_error(ErrCode.VALUE)
            )
        levels[name] = _LEVELS[prefix]
    return levels


class _KeywordFilter(logging.Filter):
    def __init__(self, spec):
        super().__init__()
        words = [w.strip() for w in spec.split(",") if w.strip()]
        self.keep = [w[1:] for w in words if w.startswith("+")]
        self.drop = [w[1:] for w in words if w.startswith("-")]

    def filter(self, record):
        text = record.getMessage()
        return all(w in text for w in self.keep) and not any(w in text for w in self.drop)


def _log_dispatch(name, inputs, outputs, device, start_ns, end_ns):
    duration_us = (end_ns - start_ns) / 1000.0
    get_logger("dispatch").debug("%s on npu:%d took %.1f us", name, device, duration_us)
    if duration_us > 1000.0:
        get_logger("dispatch_time").info("%s on npu:%d took %.3f ms", name, device, duration_us / 1000.0)


def configure():
    """Apply TORCH_NPU_LOGS / TORCH_NPU_LOGS_FILTER (called at import)."""
    global _dispatch_hook
    spec = os.environ.get("TORCH_NPU_LOGS")
    if not spec:
        return
    levels = parse_spec(spec)
    root = logging.getLogger("torch_npu")
    if not any(getattr(h, "_torch_npu_logs", False) for h in root.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[%(asctime)s] %(name)s %(levelname)s %(message)s"))
        handler._torch_npu_logs = True
        keyword_spec = os.environ.get("TORCH_NPU_LOGS_FILTER")
        if keyword_spec:
            handler.addFilter(_KeywordFilter(keyword_spec))
        root.addHandler(handler)
        root.propagate = False
    root.setLevel(logging.DEBUG)
    for module in MODULES:
        get_logger(module).setLevel(levels.get(module, logging.WARNING))
    wants_ops = (
        levels.get("dispatch", logging.ERROR) <= logging.DEBUG
        or levels.get("dispatch_time", logging.ERROR) <= logging.INFO
    )
    if wants_ops and _dispatch_hook is None:
        from torch_npu import _C

        _dispatch_hook = _C._add_python_op_hook(_log_dispatch)
