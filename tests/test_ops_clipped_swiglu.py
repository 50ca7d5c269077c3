"""npu_clipped_swiglu (GPT-OSS's clipped SwiGLU) against the formula of CANN's ClippedSwiglu written here:
interleaved and half splits, other split dims, MoE row filtering by group_index, gradients."""

import pytest
import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu

torch.manual_seed(0)


def reference(x, group_index=None, dim=-1, alpha=1.702, limit=7.0, bias=1.0, interleaved=True):
    dim %= x.dim()
    rows = x.float().reshape(int(torch.tensor(x.shape[:dim]).prod().item()), -1)
    if interleaved:
        a, b = rows[:, 0::2], rows[:, 1::2]
    else:
        half = rows.shape[1] // 2
        a, b = rows[:, :half], rows[:, half:]
    a = torch.minimum(a, torch.tensor(limit))
    b = torch.maximum(torch.minimum(b, torch.tensor(limit)), torch.tensor(-limit))
    y = a * (1 / (1 + torch.exp(-alpha * a))) * (b + bias)
    if group_index is not None:
        y[int(group_index.sum()) :] = 0
    shape = list(x.shape)
    shape[dim] //= 2
    return y.to(x.dtype).reshape(shape)


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("dim", [-1, 1])
def test_clipped_swiglu(interleaved, dim):
    x = torch.randn(3, 4, 6) * 6  # past the limit on both sides
    kwargs = {"dim": dim, "interleaved": interleaved, "alpha": 1.5, "limit": 5.0, "bias": 0.5}
    check_op(
        lambda x, **kw: torch_npu.npu_clipped_swiglu(x, **kw), (x,), reference, kwargs, atol=1e-5, rtol=1e-5, grad=(0,)
    )


def test_clipped_swiglu_group_index_keeps_the_routed_rows():
    x = torch.randn(6, 8)
    group_index = torch.tensor([2, 1, 0])
    out = check_op(
        lambda x, g: torch_npu.npu_clipped_swiglu(x, group_index=g), (x, group_index), reference, atol=1e-5, rtol=1e-5
    )
    assert not out[3:].cpu().any() and out[:3].cpu().all()


def test_clipped_swiglu_bf16_computes_in_float32():
    x = (torch.randn(4, 16) * 4).bfloat16()
    out = torch_npu.npu_clipped_swiglu(x.npu())
    assert out.dtype == torch.bfloat16 and torch.equal(out.cpu(), reference(x))


def test_clipped_swiglu_needs_an_even_split():
    raises_operator_error(
        lambda: torch_npu.npu_clipped_swiglu(torch.randn(2, 5, device="npu")),
        "npu_clipped_swiglu: the size of dim 1 (5) must be even",
    )
