"""npu_grouped_matmul_finalize_routing against the experts' products, dequantisation, routing weights and the
scatter-add combine written out row by row (the documented top-k routing example, scaled down)."""

import pytest
import torch

import torch_npu


def _example(seed, batch=6, top_k=2, experts=3, k=16, n=8):
    g = torch.Generator().manual_seed(seed)
    m = batch * top_k
    x = torch.randint(-10, 10, (m, k), generator=g, dtype=torch.int8)
    w = torch.randint(-10, 10, (experts, k, n), generator=g, dtype=torch.int8)
    scale = torch.randn(experts, n, generator=g) * 0.01
    pertoken = torch.randn(m, generator=g) * 0.01
    counts = torch.tensor([5, 4, 3], dtype=torch.int64)
    shared = (torch.randn(batch // 2, n, generator=g) * 0.1).to(torch.bfloat16)
    logit = torch.softmax(torch.randn(batch, top_k, generator=g), -1).reshape(m)
    row_index = torch.randperm(m, generator=g) // top_k
    return x, w, counts, scale, pertoken, shared, logit, row_index, batch


def reference(x, w, counts, scale, pertoken, shared, logit, row_index, batch, shared_offset, shared_weight):
    out = torch.zeros(batch, w.shape[-1], dtype=torch.float64)
    out[shared_offset : shared_offset + shared.shape[0]] += shared.double() * shared_weight
    groups = torch.repeat_interleave(torch.arange(len(counts)), counts)
    for i in range(int(counts.sum())):
        e = int(groups[i])
        row = (x[i].double() @ w[e].double()) * scale[e].double() * float(pertoken[i]) * float(logit[i])
        out[int(row_index[i])] += row
    return out.float()


@pytest.mark.parametrize("cumulative", [False, True])
def test_finalize_routing_combines_each_routed_row(cumulative):
    x, w, counts, scale, pertoken, shared, logit, row_index, batch = _example(0)
    group_list = counts.cumsum(0) if cumulative else counts
    got = torch_npu.npu_grouped_matmul_finalize_routing(
        x.npu(),
        torch_npu.npu_format_cast(w.npu(), 29),
        group_list.npu(),
        scale=scale.npu(),
        pertoken_scale=pertoken.npu(),
        shared_input=shared.npu(),
        logit=logit.npu(),
        row_index=row_index.npu(),
        shared_input_weight=0.5,
        shared_input_offset=batch // 2,
        output_bs=batch,
        group_list_type=0 if cumulative else 1,
    )
    want = reference(x, w, counts, scale, pertoken, shared, logit, row_index, batch, batch // 2, 0.5)
    assert got.dtype == torch.float32 and got.shape == (batch, w.shape[-1])
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-6)


def test_finalize_routing_refuses_the_a8w4_form():
    x, w, counts, *_ = _example(1)
    with pytest.raises(RuntimeError, match="^npu_grouped_matmul_finalize_routing: bias and offset belong to the A8W4"):
        torch_npu.npu_grouped_matmul_finalize_routing(x.npu(), w.npu(), counts.npu(), bias=torch.ones(3, 8).npu())
    with pytest.raises(RuntimeError, match=r"group_list must hold e=3 groups, got 2"):
        torch_npu.npu_grouped_matmul_finalize_routing(x.npu(), w.npu(), counts[:2].npu())
