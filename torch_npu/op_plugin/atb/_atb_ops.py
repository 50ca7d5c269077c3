"""torch_npu.op_plugin.atb._atb_ops: registering op-plugin's ATB operators, as inference engines call it
(vllm-ascend's worker calls `_register_atb_extensions()` before building its model).

On the card, `_register_atb_extensions()` loads op-plugin's ATB library (it needs the NNAL package) and makes
each ATB operator torch_npu.<name> (the rest are torch_npu.atb.<name>); every function of this module named
after an operator registers first, then calls torch.ops.atb.<name>. vnpu defines the ATB operators with the rest
of its operator library (torch_npu.ops: kernel, fake kernel and backward), so registering checks that each one
is where torch_npu puts it and loads nothing.
"""

from functools import lru_cache, wraps

import torch

import torch_npu
from torch_npu.ops.registration import ATB_MODULE_OPERATORS

__all__ = []


def _atb_operator_names():
    import torch_npu.ops  # noqa: F401  (defines the operators)

    all_names = torch._C._dispatch_get_all_op_names()
    names = {name.split("::", 1)[1].split(".", 1)[0] for name in all_names if name.startswith("atb::")}
    return sorted(names)


# ATB operators offered as torch_npu.<name> / as torch_npu.atb.<name>
_NAMES = _atb_operator_names()
API_LIST = [name for name in _NAMES if name not in ATB_MODULE_OPERATORS]
ATB_API_LIST = [name for name in _NAMES if name in ATB_MODULE_OPERATORS]


@lru_cache(None)
def _register_atb_extensions():
    for name in API_LIST:
        operator = getattr(torch.ops.atb, name)
        if getattr(torch_npu, name, None) is not operator:
            setattr(torch_npu, name, operator)


def lazy_load_atb_so(api_func):
    """`api_func` with the ATB operators registered before its first call."""

    @wraps(api_func)
    def wrapper(*args, **kwargs):
        _register_atb_extensions()
        return api_func(*args, **kwargs)

    return wrapper


def create_lazy_atb_function(api_name):
    @lazy_load_atb_so
    def generated_function(*args, **kwargs):
        return getattr(torch.ops.atb, api_name)(*args, **kwargs)

    generated_function.__name__ = api_name
    return generated_function


for _name in API_LIST + ATB_API_LIST:
    globals()[_name] = create_lazy_atb_function(_name)
del _name
