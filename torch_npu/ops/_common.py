"""Helpers shared by the operator definitions: argument checks with torch_npu's error suffix, and
the ScalarType numbers that `int dtype` arguments carry."""

import torch

from torch_npu.utils._error_code import ErrCode, ops_error

# c10::ScalarType numbering (a torch.dtype passed to an `int` argument arrives as this number).
_SCALAR_TYPES = {
    0: torch.uint8,
    1: torch.int8,
    2: torch.int16,
    3: torch.int32,
    4: torch.int64,
    5: torch.float16,
    6: torch.float32,
    7: torch.float64,
    9: torch.complex64,
    10: torch.complex128,
    11: torch.bool,
    15: torch.bfloat16,
    23: torch.float8_e5m2,
    24: torch.float8_e4m3fn,
}


def check(condition, op, message):
    """Raise RuntimeError '<op>: <message>' + ERR01001 unless condition holds."""
    if not condition:
        raise RuntimeError(f"{op}: {message}" + ops_error(ErrCode.PARAM))


def require(condition, message):
    """Raise RuntimeError with torch_npu's own text for this check (no operator prefix) + ERR01001."""
    if not condition:
        raise RuntimeError(message + ops_error(ErrCode.PARAM))


def dtype_of(value, op, argument="dtype"):
    """The torch.dtype an `int dtype` argument names."""
    if isinstance(value, torch.dtype):
        return value
    from torch_npu._c_children import TORCH_DTYPES, DTypeNumber

    if value in TORCH_DTYPES:  # torch_npu.float32 (256), torch_npu.float8_e4m3fn (292), ...
        return TORCH_DTYPES[value]
    npu_only = DTypeNumber._value2member_map_.get(value)
    check(
        npu_only is None, op, f"{argument}=torch_npu.{getattr(npu_only, 'name', '')} is a format vnpu does not compute"
    )
    check(
        value in _SCALAR_TYPES,
        op,
        f"{argument}={value} is not a dtype vnpu supports " f"({', '.join(str(d) for d in _SCALAR_TYPES.values())})",
    )
    return _SCALAR_TYPES[value]


def reduced_dims(x, trailing, op, argument):
    """The last `trailing` dims of x (those a normalisation weight of that rank covers)."""
    check(0 < trailing <= x.dim(), op, f"{argument} must have between 1 and {x.dim()} dimensions, got {trailing}")
    return tuple(range(x.dim() - trailing, x.dim()))
