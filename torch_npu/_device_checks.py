"""torch_npu's error for a CPU tensor among an operator's npu tensors (csrc/aten/CpuOperandError.h).

torch_npu's generated operator wrappers check devices as PyTorch's native_functions.yaml says: operators marked
``device_check: NoCheck`` (the TensorIterator ones: add, mul, where, ...) hand a CPU tensor on to the kernel, which
refuses it with torch_npu's text; the others raise PyTorch's common-device error. Consulted on the error path
only, so the yaml is read the first time such an error happens.
"""

import functools
import re

from torch_npu._op_support import native_functions_text
from torch_npu.utils._error_code import ErrCode, ops_error

__all__ = []

CPU_OPERAND = (
    "Expected all tensors to be on the same device. Expected NPU tensor, please check whether the input tensor "
    "device is correct."
)


@functools.lru_cache(maxsize=1)
def _unchecked_operators():
    entries = re.split(r"^- func: ", native_functions_text(), flags=re.MULTILINE)[1:]
    return frozenset(
        entry.split("(", 1)[0] for entry in entries if re.search(r"^\s+device_check: NoCheck", entry, re.MULTILINE)
    )


def cpu_operand_message(op):
    """torch_npu's text for a CPU operand of `op` ("aten::add.Tensor"), or "" where the wrapper checks devices."""
    name = op.split("::", 1)[-1]
    return CPU_OPERAND + ops_error(ErrCode.TYPE) if name in _unchecked_operators() else ""
