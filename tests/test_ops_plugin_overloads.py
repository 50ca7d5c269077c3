"""The further overloads of op-plugin's schema list: each `.out` overload writes exactly what its functional
overload returns into the given tensors (resized) and returns them; npu_grouped_matmul.List takes group_list as
ints."""

import pytest
import torch

import torch_npu

NPU = "npu"


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(NPU)


SINGLE = [
    ("npu_broadcast", lambda: ((_x(3, 1), [2, 3, 4]), {})),
    ("npu_conv2d", lambda: ((_x(1, 2, 6, 6), _x(3, 2, 3, 3, seed=1), _x(3, seed=2), [1, 1], [1, 1], [1, 1], 1), {})),
    ("npu_conv3d", lambda: ((_x(1, 2, 4, 4, 4), _x(3, 2, 3, 3, 3, seed=1), None, [1], [0], [1], 1), {})),
    ("npu_indexing", lambda: ((_x(4, 6), [1, 0], [3, 6], [1, 2]), {})),
    ("npu_reshape", lambda: ((_x(4, 6), [3, 8]), {})),
    ("npu_slice", lambda: ((_x(4, 6), [1, 2], [2, 3]), {})),
    ("npu_sort_v2", lambda: ((_x(4, 6),), {"descending": True})),
    ("npu_transpose", lambda: ((_x(2, 3, 4), [2, 0, 1]), {})),
]


@pytest.mark.parametrize(("name", "inputs"), SINGLE, ids=[name for name, _ in SINGLE])
def test_out_overload_writes_the_functional_result(name, inputs):
    args, kwargs = inputs()
    op = getattr(torch_npu, name)
    want = op(*args, **kwargs)
    out = torch.full((1,), float("nan"), device=NPU)
    returned = op(*args, **kwargs, out=out)
    assert returned is out or returned.data_ptr() == out.data_ptr()
    assert out.shape == want.shape and torch.equal(out.cpu(), want.cpu())


def test_fusion_attention_v3_and_its_grad_write_their_outputs():
    q, k, v = (_x(1, 2, 4, 8, seed=s) for s in range(3))
    want = torch_npu.npu_fusion_attention_v3(q, k, v, 2, "BNSD", scale=0.35)
    outs = [torch.empty(0, device=NPU, dtype=w.dtype) for w in want]
    names = ("attention_score", "softmax_max", "softmax_sum", "softmax_out", "seed", "offset")
    got = torch.ops.npu.npu_fusion_attention_v3.out(q, k, v, 2, "BNSD", scale=0.35, **dict(zip(names, outs)))
    for g, o, w in zip(got, outs, want):
        assert g.data_ptr() == o.data_ptr() and torch.equal(o.cpu(), w.cpu())
    dy = _x(1, 2, 4, 8, seed=5)
    saved = {"softmax_max": want[1], "softmax_sum": want[2], "attention_in": want[0], "scale_value": 0.35}
    grads = torch_npu.npu_fusion_attention_grad_v3(q, k, v, dy, 2, "BNSD", **saved)
    written = {n: torch.empty(0, device=NPU) for n in ("dq", "dk", "dv", "dpse", "dsink")}
    torch_npu.npu_fusion_attention_grad_v3(q, k, v, dy, 2, "BNSD", **saved, out=tuple(written.values()))
    for w, g in zip(written.values(), grads):
        assert torch.equal(w.cpu(), g.cpu())


def test_grouped_matmul_takes_group_list_as_ints():
    x, ws = _x(7, 4), [_x(4, 3, seed=s) for s in range(1, 4)]
    as_tensor = torch_npu.npu_grouped_matmul([x], ws, group_list=torch.tensor([2, 5, 7], device=NPU), split_item=3,
                                             group_type=0)  # fmt: skip
    as_ints = torch_npu.npu_grouped_matmul([x], ws, group_list=[2, 5, 7], split_item=3, group_type=0)
    assert torch.equal(as_ints[0].cpu(), as_tensor[0].cpu())
    expected = torch.cat([x[:2] @ ws[0], x[2:5] @ ws[1], x[5:] @ ws[2]])
    torch.testing.assert_close(as_ints[0].cpu(), expected.cpu())


def test_grouped_matmul_list_form_traces_one_output_per_group():
    # With group_list as ints the per-group row counts are known while tracing: split_item 0/1 give one output
    # per group under FakeTensorMode and torch.compile(fullgraph=True), as on torch_npu.
    x, ws = _x(7, 4), [_x(4, 3 + s, seed=s) for s in range(3)]
    eager = torch_npu.npu_grouped_matmul([x], ws, group_list=[2, 5, 7], split_item=1)
    assert [tuple(t.shape) for t in eager] == [(2, 3), (3, 4), (2, 5)]
    with torch._subclasses.FakeTensorMode() as mode:
        fake = torch_npu.npu_grouped_matmul([mode.from_tensor(x)], [mode.from_tensor(w) for w in ws],
                                            group_list=[2, 5, 7], split_item=0)  # fmt: skip
        assert [tuple(t.shape) for t in fake] == [(2, 3), (3, 4), (2, 5)]
    compiled = torch.compile(
        lambda x, *ws: torch_npu.npu_grouped_matmul([x], list(ws), group_list=[2, 5, 7], split_item=1),
        fullgraph=True,
        backend="eager",
    )
    for got, want in zip(compiled(x, *ws), eager):
        assert torch.equal(got.cpu(), want.cpu())
