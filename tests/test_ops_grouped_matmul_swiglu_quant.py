"""npu_grouped_matmul_swiglu_quant (+ _v2) against the group-by-group golden of torch_npu's own tests."""

import pytest
import torch
from error_cases import raises_operator_error

import torch_npu

E, M, K, N = 3, 40, 64, 32


def golden(x, weight, weight_scale, x_scale, ends):
    output, scale = torch.zeros(M, N // 2, dtype=torch.int8), torch.zeros(M)
    start = 0
    for e, end in enumerate(ends):
        if end > start:
            y = torch.matmul(x[start:end].to(torch.int32), weight[e].to(torch.int32)).to(torch.float32)
            y = torch.mul(torch.mul(y, weight_scale[e]), x_scale[start:end].reshape(-1, 1))
            left, gate = y.chunk(2, dim=-1)
            act = left * torch.sigmoid(left) * gate
            factor = 127 / torch.max(torch.abs(act), -1).values
            output[start:end] = torch.round(act * factor.reshape(-1, 1)).to(torch.int8)
            scale[start:end] = 1 / factor
        start = max(start, end)
    return output, scale


def inputs(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-128, 127, (M, K), generator=g, dtype=torch.int8)
    weight = torch.randint(-128, 127, (E, K, N), generator=g, dtype=torch.int8)
    return x, weight, torch.randn(E, N, generator=g), torch.randn(M, generator=g)


@pytest.mark.parametrize("ends", [[10, 10, 35], [0, 20, 40]])
def test_first_version_matches_the_golden(ends):
    x, w, ws, xs = inputs(len(ends) + ends[0])
    group_list = torch.tensor(ends, dtype=torch.int64)
    out, scale, offset = torch_npu.npu_grouped_matmul_swiglu_quant(
        x.npu(), torch_npu.npu_format_cast(w.npu(), 29), group_list.npu(), ws.npu(), xs.npu()
    )
    want_out, want_scale = golden(x, w, ws, xs, ends)
    assert torch.equal(out.cpu(), want_out) and torch.equal(scale.cpu(), want_scale)
    assert not offset.cpu().any() and not out.cpu()[ends[-1] :].any()


@pytest.mark.parametrize("group_list_type", [0, 1])
def test_v2_takes_tensor_lists_and_counts_or_ends(group_list_type):
    x, w, ws, xs = inputs(5)
    ends = [12, 30, 40]
    given = ends if group_list_type == 0 else [12, 18, 10]
    out, scale = torch_npu.npu_grouped_matmul_swiglu_quant_v2(
        x.npu(), [w.npu()], [ws.npu()], xs.npu(), torch.tensor(given).npu(), group_list_type=group_list_type
    )
    want_out, want_scale = golden(x, w, ws, xs, ends)
    assert torch.equal(out.cpu(), want_out) and torch.equal(scale.cpu(), want_scale)


BAD_INPUTS = [
    (
        lambda x, w, ws, xs, gl: torch_npu.npu_grouped_matmul_swiglu_quant(x.float(), w, gl, ws, xs),
        "npu_grouped_matmul_swiglu_quant: x and weight must be int8",
    ),
    (
        lambda x, w, ws, xs, gl: torch_npu.npu_grouped_matmul_swiglu_quant(x, w, gl[:2], ws, xs),
        r"npu_grouped_matmul_swiglu_quant: group_list must hold one entry per expert \(3\)",
    ),
    (
        lambda x, w, ws, xs, gl: torch_npu.npu_grouped_matmul_swiglu_quant(x, w, gl * 10, ws, xs),
        "npu_grouped_matmul_swiglu_quant: group_list covers 400 rows but x has 40",
    ),
    (
        lambda x, w, ws, xs, gl: torch_npu.npu_grouped_matmul_swiglu_quant_v2(x, [w], [ws], xs, gl, quant_mode=1),
        "npu_grouped_matmul_swiglu_quant_v2: vnpu supports the A8W8 per-channel / per-token scheme",
    ),
]


@pytest.mark.parametrize("call, message", BAD_INPUTS)
def test_bad_inputs(call, message):
    x, w, ws, xs = inputs(6)
    with pytest.raises(RuntimeError, match=f"^{message}"):
        call(x.npu(), w.npu(), ws.npu(), xs.npu(), torch.tensor([10, 20, 40]).npu())


def test_under_torch_compile_fullgraph():
    x, w, ws, xs = inputs(7)
    gl = torch.tensor([10, 25, 40]).npu()
    args = (x.npu(), w.npu(), gl, ws.npu(), xs.npu())
    compiled = torch.compile(torch_npu.npu_grouped_matmul_swiglu_quant, backend="aot_eager", fullgraph=True)
    for got, want in zip(compiled(*args), torch_npu.npu_grouped_matmul_swiglu_quant(*args)):
        assert torch.equal(got.cpu(), want.cpu())


L = torch.long


def n(*shape, **kwargs):
    return torch.zeros(*shape, **kwargs).npu()


EXACT_ERRORS = [
    (
        lambda: torch_npu.npu_grouped_matmul_swiglu_quant(
            n(4, 8, dtype=torch.int8), n(8, 4, dtype=torch.int8), n(1, dtype=L), n(1, 4), n(4)
        ),
        "npu_grouped_matmul_swiglu_quant: x must be [M, K] and weight [E, K, N], got (4, 8) and (8, 4)",
    ),
    (
        lambda: torch_npu.npu_grouped_matmul_swiglu_quant(
            n(4, 8, dtype=torch.int8), n(1, 7, 4, dtype=torch.int8), n(1, dtype=L), n(1, 4), n(4)
        ),
        "npu_grouped_matmul_swiglu_quant: x's K 8 does not match weight's 7",
    ),
    (
        lambda: torch_npu.npu_grouped_matmul_swiglu_quant(
            n(4, 8, dtype=torch.int8), n(1, 8, 5, dtype=torch.int8), n(1, dtype=L), n(1, 5), n(4)
        ),
        "npu_grouped_matmul_swiglu_quant: weight's N must be even (SwiGLU halves it), got 5",
    ),
    (
        lambda: torch_npu.npu_grouped_matmul_swiglu_quant(
            n(4, 8, dtype=torch.int8), n(1, 8, 4, dtype=torch.int8), n(1, dtype=L), n(4), n(4)
        ),
        "npu_grouped_matmul_swiglu_quant: weight_scale must be [E=1, N=4], got (4,)",
    ),
    (
        lambda: torch_npu.npu_grouped_matmul_swiglu_quant(
            n(4, 8, dtype=torch.int8), n(1, 8, 4, dtype=torch.int8), n(1, dtype=L), n(1, 4), n(3)
        ),
        "npu_grouped_matmul_swiglu_quant: x_scale must be [M=4], got (3,)",
    ),
    (
        lambda: torch_npu.npu_grouped_matmul_swiglu_quant(
            n(4, 8, dtype=torch.int8), n(1, 8, 4, dtype=torch.int8), n(1, dtype=L), n(1, 4), n(4), bias=n(4)
        ),
        "npu_grouped_matmul_swiglu_quant: bias and offset are reserved and must be None",
    ),
    (
        lambda: torch_npu.npu_grouped_matmul_swiglu_quant(
            n(4, 8, dtype=torch.int8), n(2, 8, 4, dtype=torch.int8), torch.tensor([3, 1]).npu(), n(2, 4), n(4)
        ),
        "npu_grouped_matmul_swiglu_quant: group_list must describe non-negative group sizes, got [3, -2]",
    ),
    (
        lambda: torch_npu.npu_grouped_matmul_swiglu_quant_v2(
            n(4, 8, dtype=torch.int8), [n(1, 8, 4, dtype=torch.int8)] * 2, [n(1, 4)], n(4), n(1, dtype=L)
        ),
        "npu_grouped_matmul_swiglu_quant_v2: A8W8 takes weight and weight_scale as one tensor each, got 2 and 1",
    ),
    (
        lambda: torch_npu.npu_grouped_matmul_swiglu_quant_v2(
            n(4, 8, dtype=torch.int8), [n(1, 8, 4, dtype=torch.int8)], [n(1, 4)], n(4), n(1, dtype=L), smooth_scale=n(4)
        ),
        "npu_grouped_matmul_swiglu_quant_v2: smooth_scale, weight_assist_matrix and bias belong to the MX formats, which vnpu does not support",
    ),
    (
        lambda: torch_npu.npu_grouped_matmul_swiglu_quant_v2(
            n(4, 8, dtype=torch.int8), [n(1, 8, 4, dtype=torch.int8)], [n(1, 4)], n(4), n(1, dtype=L), group_list_type=2
        ),
        "npu_grouped_matmul_swiglu_quant_v2: group_list_type must be 0 (cumsum) or 1 (count), got 2",
    ),
]


@pytest.mark.parametrize("call, message", EXACT_ERRORS)
def test_bad_inputs_give_torch_npus_error_text(call, message):
    raises_operator_error(call, message)
