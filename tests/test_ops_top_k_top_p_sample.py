"""npu_top_k_top_p_sample against a row-by-row reference written from torch_npu's documented algorithm (sort,
top-k, softmax, top-p on the mass before each token, min-p, exponential or multinomial sampling)."""

import pytest
import torch
from op_check import check_op

import torch_npu

V = 64


def ref_row(logits, k, p, q=None, min_p=None, eps=1e-8, ks_max=1024):
    """(selected index, surviving vocabulary indices) of one row."""
    x = logits.float()
    values, order = torch.sort(x, descending=True, stable=True)
    filtered = False
    if 1 <= k <= min(V, ks_max):
        values, order, filtered = values[:k], order[:k], True
    probs = torch.softmax(values, 0)
    if p <= 0:
        count, filtered = 1, True
    elif p < 1:
        mass_before = torch.cumsum(probs, 0) - probs
        count, filtered = int((mass_before <= p).sum()), True
    else:
        count = len(values)
    values, order = values[:count], order[:count]
    if min_p is not None and min_p > 0:
        probs = torch.softmax(values, 0)
        count = 1 if min_p >= 1 else int((probs >= probs.max() * min_p).sum())
        values, order, filtered = values[:count], order[:count], True
    probs = torch.softmax(values, 0)
    if q is None:
        return int(order[0]), order
    weights = q[: len(order)] if filtered else q[order]
    return int(order[(probs / (weights + eps)).argmax()]), order


def _case(seed, batch=6, dtype=torch.float16):
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(batch, V, generator=g) * 2).to(dtype)
    top_k = torch.tensor([5, 1, 2000, 64, 0, 17][:batch], dtype=torch.int32)
    top_p = torch.tensor([0.7, 0.5, 0.3, 1.0, 1.0, -0.5][:batch], dtype=dtype)
    q = torch.empty(batch, V).exponential_(generator=g)
    return logits, top_k, top_p, q


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_q_sample_with_every_filter_combination(dtype):
    """Rows: top-k + top-p, k = 1, top-p alone (k out of range), top-k alone, nothing (q in vocabulary order),
    and p <= 0 (the largest only)."""
    for seed in range(20):
        logits, top_k, top_p, q = _case(seed, dtype=dtype)
        idx, selected = torch_npu.npu_top_k_top_p_sample(
            logits.npu(), top_k.npu(), top_p.npu(), q.npu(), is_need_logits=True
        )
        assert idx.dtype == torch.int64 and selected.dtype == torch.float32
        for b in range(logits.shape[0]):
            want, survivors = ref_row(logits[b], int(top_k[b]), float(top_p[b]), q[b])
            assert int(idx[b]) == want, (seed, b)
            expected = torch.full((V,), float("-inf"))
            expected[survivors] = logits[b, survivors].float()
            assert torch.equal(selected.cpu()[b], expected), (seed, b)


def test_fake_kernel_and_compile():
    logits, top_k, top_p, q = _case(5, dtype=torch.float32)

    def op(logits, top_k, top_p, q):
        return torch_npu.npu_top_k_top_p_sample(logits, top_k, top_p, q, is_need_logits=True)

    def reference(logits, top_k, top_p, q):
        idx, selected = [], torch.full(logits.shape, float("-inf"))
        for b in range(logits.shape[0]):
            chosen, survivors = ref_row(logits[b], int(top_k[b]), float(top_p[b]), q[b])
            idx.append(chosen)
            selected[b, survivors] = logits[b, survivors]
        return torch.tensor(idx), selected

    check_op(op, (logits, top_k, top_p, q), reference, atol=0, rtol=0)


def test_without_q_the_largest_logit_is_chosen_and_logits_output_is_optional():
    logits, top_k, top_p, _ = _case(3)
    idx, selected = torch_npu.npu_top_k_top_p_sample(logits.npu(), top_k.npu(), top_p.npu())
    assert torch.equal(idx.cpu(), logits.float().argmax(-1))
    assert selected.shape == (6, V) and not selected.cpu().any()


def test_min_p_and_ks_max():
    for seed in range(10):
        logits, top_k, top_p, q = _case(seed)
        min_ps = torch.tensor([0.2, 0.0, 0.5, 1.0, 0.05, 0.9], dtype=torch.float16)
        idx, _ = torch_npu.npu_top_k_top_p_sample(
            logits.npu(), top_k.npu(), top_p.npu(), q.npu(), min_ps=min_ps.npu(), ks_max=16
        )
        for b in range(6):
            want, _ = ref_row(logits[b], int(top_k[b]), float(top_p[b]), q[b], float(min_ps[b]), ks_max=16)
            assert int(idx[b]) == want, (seed, b)


def test_probabilities_input_and_zero_as_the_invalid_value():
    g = torch.Generator().manual_seed(7)
    probs = torch.softmax(torch.randn(4, V, generator=g), -1)
    top_k = torch.full((4,), 8, dtype=torch.int32)
    top_p = torch.full((4,), 0.5)
    idx, selected = torch_npu.npu_top_k_top_p_sample(
        probs.npu(), top_k.npu(), top_p.npu(), is_need_logits=True, input_is_logits=False
    )
    assert torch.equal(idx.cpu(), probs.argmax(-1))
    for b in range(4):
        _, survivors = ref_row(probs[b].log(), 8, 0.5)
        expected = torch.zeros(V)
        expected[survivors] = probs[b, survivors]
        assert torch.equal(selected.cpu()[b], expected)


def test_multinomial_follows_the_generator_seed():
    logits, top_k, top_p, _ = _case(11, dtype=torch.float32)
    draws = []
    for _ in range(2):
        generator = torch.Generator(device="npu").manual_seed(1234)
        idx, _ = torch_npu.npu_top_k_top_p_sample(
            logits.npu(), top_k.npu(), top_p.npu(), post_sample="multiNomial", generator=generator
        )
        draws.append(idx.cpu())
    assert torch.equal(draws[0], draws[1])
    for b in range(6):
        _, survivors = ref_row(logits[b], int(top_k[b]), float(top_p[b]))
        assert int(draws[0][b]) in survivors.tolist()
    counts = torch.zeros(V)
    generator = torch.Generator(device="npu").manual_seed(0)
    one = logits[:1].npu()
    for _ in range(400):
        idx, _ = torch_npu.npu_top_k_top_p_sample(
            one,
            torch.tensor([3], dtype=torch.int32).npu(),
            torch.ones(1).npu(),
            post_sample="multiNomial",
            generator=generator,
        )
        counts[int(idx)] += 1
    top3 = torch.sort(logits[0], descending=True, stable=True).indices[:3]
    assert counts[top3].sum() == 400
    torch.testing.assert_close(counts[top3] / 400, torch.softmax(logits[0, top3], 0), atol=0.1, rtol=0)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"logits": torch.zeros(V)}, r"logits must be a non-empty 2-D \[B, V\] tensor, got \(64,\)"),
        ({"top_k": torch.ones(2, dtype=torch.int32)}, r"top_k must be 1-D \[B=3\], got \(2,\)"),
        ({"top_k": torch.ones(3)}, "top_k must be int32, got torch.float32"),
        ({"q": torch.ones(3, V, dtype=torch.float16)}, r"q must be float32 \[3, 64\] for qSample"),
        ({"post_sample": "greedy"}, "post_sample must be 'qSample', 'multiNomial' or 'None', got 'greedy'"),
        ({"ks_max": 0}, "ks_max must be a positive integer, got 0"),
    ],
)
def test_errors(change, message):
    args = {"logits": torch.zeros(3, V), "top_k": torch.ones(3, dtype=torch.int32), "top_p": torch.ones(3)}
    args.update(change)
    args = {name: value.npu() if isinstance(value, torch.Tensor) else value for name, value in args.items()}
    with pytest.raises(RuntimeError, match=f"^npu_top_k_top_p_sample: {message}"):
        torch_npu.npu_top_k_top_p_sample(**args)
