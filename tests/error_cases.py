"""Helpers for the bad-input tables that sit beside each feature's tests: small npu inputs and the
checks for torch_npu's error text (the first line is compared exactly; torch_npu's
"[ERROR] ... ERRxxyyy" suffix follows on the next line where torch_npu adds one)."""

import pytest
import torch

NPU = "npu"
I32 = torch.int32
FLOATS = "DT_FLOAT16,DT_FLOAT,DT_BFLOAT16,"


def t(*shape, dtype=torch.float32):
    """A small npu tensor of `dtype` (random floats, zeros otherwise)."""
    if dtype.is_floating_point:
        return torch.randn(*shape).to(dtype).to(NPU)
    return torch.zeros(*shape, dtype=dtype, device=NPU)


def int8_zeros(*shape):
    return torch.zeros(*shape, dtype=torch.int8, device=NPU)


def graph_in_capture(fn):
    """fn(graph) called while `graph` captures."""
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        fn(g)


class LinearSubclass(torch.nn.Linear):
    pass


def hooked_linear():
    m = torch.nn.Linear(2, 2).npu()
    m.register_forward_hook(lambda *a: None)
    return m


def ez1001(api, argument, got, supported):
    """CANN's EZ1001 text for an input dtype the kernel does not take."""
    return (
        f"call {api} failed, detail:EZ1001: Tensor {argument} not implemented for {got}, should be in dtype "
        f"support list [{supported}]."
    )


def first_line(error):
    return str(error).split("\n")[0]


def raises_exactly(call, kind, message):
    with pytest.raises(kind) as info:
        call()
    assert first_line(info.value) == message


def _raises_runtime_error_with_code(call, message, code):
    with pytest.raises(RuntimeError) as info:
        call()
    lines = str(info.value).split("\n")
    assert lines[0] == message
    assert code in lines[-1]


def raises_operator_error(call, message):
    _raises_runtime_error_with_code(call, message, "ERR01001 OPS invalid parameter")


def raises_unsupported_dtype(call, message):
    _raises_runtime_error_with_code(call, message, "ERR01100 OPS call acl api failed")
