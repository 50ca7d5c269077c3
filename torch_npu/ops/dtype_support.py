"""The dtypes each npu operator's aclnn kernel accepts, checked before the kernel runs.

On Ascend, an aclnn operator refuses an input dtype outside its support list before any work is
done, in CANN's words ("EZ1001: Tensor x not implemented for DT_INT32, should be in dtype support
list [...]"), and torch_npu raises that as "call aclnnXxx failed". npu operators declare their
lists (`npu_op(..., dtypes={...}, api="aclnnXxx")`) so vnpu refuses the same inputs with the same
text instead of computing on a dtype the hardware does not take.
"""

import torch

from torch_npu.utils._error_code import ErrCode, ops_error

FLOATS = (torch.float16, torch.float32, torch.bfloat16)
HALF_AND_FLOAT = (torch.float16, torch.float32)
INDEX_TYPES = (torch.int32, torch.int64)

# CANN's names of the dtypes (ge::DataType as aclnn prints it).
_CANN_NAMES = {
    torch.float16: "DT_FLOAT16",
    torch.float32: "DT_FLOAT",
    torch.bfloat16: "DT_BFLOAT16",
    torch.float64: "DT_DOUBLE",
    torch.int8: "DT_INT8",
    torch.uint8: "DT_UINT8",
    torch.int16: "DT_INT16",
    torch.int32: "DT_INT32",
    torch.int64: "DT_INT64",
    torch.bool: "DT_BOOL",
    torch.complex64: "DT_COMPLEX64",
    torch.complex128: "DT_COMPLEX128",
    torch.uint16: "DT_UINT16",
    torch.uint32: "DT_UINT32",
    torch.uint64: "DT_UINT64",
    torch.float8_e4m3fn: "DT_FLOAT8_E4M3FN",
    torch.float8_e5m2: "DT_FLOAT8_E5M2",
}


def cann_name(dtype):
    return _CANN_NAMES.get(dtype, f"DT_UNDEFINED({dtype})")


def unsupported_dtype(api, argument, dtype, supported):
    listed = "".join(cann_name(d) + "," for d in supported)
    return RuntimeError(
        f"call {api} failed, detail:EZ1001: Tensor {argument} not implemented for {cann_name(dtype)}, "
        f"should be in dtype support list [{listed}]." + ops_error(ErrCode.ACL)
    )


def dtype_checked(kernel, schema_arguments, dtypes, api):
    """`kernel`, refusing tensor arguments (or tensors of list arguments) whose dtype is not listed."""
    names = [a.name for a in schema_arguments]
    unknown = set(dtypes) - set(names)
    if unknown:
        raise ValueError(f"dtypes names arguments the schema does not have: {sorted(unknown)}")
    checks = [(names.index(name), name, frozenset(supported), supported) for name, supported in dtypes.items()]

    def checked(*args, **kwargs):
        for position, name, allowed, supported in checks:
            value = args[position] if position < len(args) else kwargs.get(name)
            for tensor in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(tensor, torch.Tensor) and tensor.dtype not in allowed:
                    raise unsupported_dtype(api, name, tensor.dtype, supported)
        return kernel(*args, **kwargs)

    checked.__name__ = getattr(kernel, "__name__", "kernel")
    checked.__doc__ = kernel.__doc__
    return checked
