"""Helpers torch_npu's operator tests import: paired cpu/npu inputs, baselines, skips, rng."""

import contextlib
import json
import os
import time
import unittest
from functools import wraps
from itertools import product

import numpy as np
import torch

__all__ = [
    "create_common_tensor",
    "create_dtype_tensor",
    "Baseline",
    "SupportedDevices",
    "SkipIfNoLapack",
    "SkipIfNotGteCANNVersion",
    "SkipIfNotRegistered",
    "check_operators_in_prof",
    "dump_baseline",
    "freeze_rng_state",
    "get_cycles_per_ms",
    "get_npu_device",
    "set_npu_device",
    "is_iterable",
    "iter_indices",
    "test_2args_broadcast",
]


def get_npu_device():
    """The device tests run on: npu:<SET_NPU_DEVICE> (npu:0 by default)."""
    return f"npu:{int(os.environ.get('SET_NPU_DEVICE', '0'))}"


def set_npu_device():
    device = get_npu_device()
    torch.npu.set_device(device)
    return device


def create_common_tensor(item, minValue, maxValue, device=None):
    """item = [numpy dtype, npu format, shape]: a CPU tensor of uniform values in [minValue, maxValue)
    and the same values on npu, cast to the format (unless it is -1)."""
    dtype, npu_format, shape = item[0], item[1], item[2]
    device = device or get_npu_device()
    values = np.random.uniform(minValue, maxValue, shape).astype(dtype)
    cpu_input = torch.from_numpy(values)
    npu_input = cpu_input.to(device)
    if npu_format != -1:
        import torch_npu

        npu_input = torch_npu.npu_format_cast(npu_input, npu_format)
    return cpu_input, npu_input


def create_dtype_tensor(shape, dtype, npu_format=-1, min_value=-5, max_value=5, no_zero=False, device=None):
    """Like create_common_tensor for a torch dtype (bool, integer and floating types); no_zero
    replaces zeros by ones."""
    device = device or get_npu_device()
    if dtype == torch.bool:
        cpu_input = torch.from_numpy(np.random.randint(0, 2, shape).astype(np.bool_))
    elif dtype.is_floating_point:
        cpu_input = torch.from_numpy(np.random.uniform(min_value, max_value, shape).astype(np.float32)).to(dtype)
    else:
        cpu_input = torch.from_numpy(np.random.randint(min_value, max_value, shape)).to(dtype)
    if no_zero:
        cpu_input = torch.where(cpu_input == 0, torch.ones_like(cpu_input), cpu_input)
    npu_input = cpu_input.to(device)
    if npu_format != -1:
        import torch_npu

        npu_input = torch_npu.npu_format_cast(npu_input, npu_format)
    return cpu_input, npu_input


class Baseline:
    """Reference values kept in a JSON file between runs (performance or accuracy baselines)."""

    def __init__(self, baselineFile):
        self.baselineFile = baselineFile
        self.baseline = {}
        if os.path.exists(baselineFile):
            with open(baselineFile) as f:
                self.baseline = json.load(f)

    def get_baseline(self, resourceId):
        return self.baseline.get(resourceId)

    def set_baseline(self, resourceId, baseline):
        self.baseline[resourceId] = baseline

    def save_baseline(self):
        with open(self.baselineFile, "w") as f:
            json.dump(self.baseline, f, indent=1, sort_keys=True)


def dump_baseline():
    """Whether this run should write baselines (DUMP_BASELINE=1)."""
    return os.environ.get("DUMP_BASELINE", "0") == "1"


def _soc_name():
    import torch_npu

    return torch_npu._C._soc_profile()["name"]


def _skip_unless(reason_to_skip):
    """A test decorator that skips when reason_to_skip() returns a reason (evaluated at call time)."""

    def decorator(fn):
        @wraps(fn)
        def wrapper(*args, **kwargs):
            reason = reason_to_skip()
            if reason:
                raise unittest.SkipTest(reason)
            return fn(*args, **kwargs)

        return wrapper

    return decorator


def SupportedDevices(supported_devices: list[str]):
    """Run the test only on the listed SoCs (prefixes of the SoC name: "Ascend910B", "Ascend910_93")."""

    def reason():
        name = _soc_name()
        if not any(name.startswith(d) for d in supported_devices):
            return f"runs on {supported_devices}, this vnpu is {name}"

    return _skip_unless(reason)


def SkipIfNoLapack():
    """Decorator: skip when PyTorch was built without LAPACK."""
    return _skip_unless(lambda: None if torch._C.has_lapack else "PyTorch compiled without Lapack")


def _version_tuple(text):
    return tuple(int(p) for p in "".join(c if c.isdigit() else " " for c in text.split("+")[0]).split()[:4])


def SkipIfNotGteCANNVersion(base_version, module="CANN"):
    """Skip unless the CANN version vnpu follows is at least base_version (e.g. "8.1.RC1")."""

    def reason():
        from torch_npu.utils import get_cann_version

        if _version_tuple(get_cann_version(module)) < _version_tuple(base_version):
            return f"needs {module} >= {base_version}"

    return _skip_unless(reason)


def SkipIfNotRegistered():
    """Decorator: skip unless the npu device is registered with PyTorch (torch_npu imported)."""
    return _skip_unless(
        lambda: None if torch._C._get_privateuse1_backend_name() == "npu" else "the npu device is not registered"
    )


def check_operators_in_prof(expected_operators, prof, unexpected_operators=None):
    """True when every expected operator (and none of the unexpected) appears in a profiler's events."""
    names = {e.key for e in prof.key_averages()}
    if not all(any(op in n for n in names) for op in expected_operators):
        return False
    return not any(any(op in n for n in names) for op in (unexpected_operators or []))


@contextlib.contextmanager
def freeze_rng_state():
    """Restore the CPU and npu random states after the block."""
    cpu_state = torch.get_rng_state()
    npu_state = torch.npu.get_rng_state() if torch.npu.is_available() else None
    try:
        yield
    finally:
        torch.set_rng_state(cpu_state)
        if npu_state is not None:
            torch.npu.set_rng_state(npu_state)


def get_cycles_per_ms() -> float:
    """Host clock ticks per millisecond, measured (vnpu's device runs on the host clock)."""
    start = time.perf_counter_ns()
    time.sleep(0.01)
    return (time.perf_counter_ns() - start) / 10.0 / 1e3


def is_iterable(obj):
    try:
        iter(obj)
        return True
    except TypeError:
        return False


def iter_indices(tensor):
    if tensor.dim() == 0:
        return range(0)
    if tensor.dim() == 1:
        return range(tensor.size(0))
    return product(*(range(s) for s in tensor.size()))


def test_2args_broadcast(fn):
    """Whether fn(a, b) broadcasts on npu exactly as on the CPU for a few shape pairs."""
    pairs = [((5, 1), (1, 4)), ((3, 1, 2), (4, 1)), ((2, 3), (3,))]
    for sa, sb in pairs:
        a, b = torch.randn(sa), torch.randn(sb)
        if not torch.equal(fn(a, b), fn(a.npu(), b.npu()).cpu()):
            return False
    return True
