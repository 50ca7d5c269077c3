"""npu_nsa_compress against the windows written out segment by segment (MindSpore's T' formula), and its
gradients (through npu_nsa_compress_grad) against autograd of that loop."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error


def windows_written_out(x, w, block, stride, ends):
    out, begin = [], 0
    for end in ends:
        length = end - begin
        for i in range(max(0, 1 + (length - block) // stride) if length >= block else 0):
            start = begin + i * stride
            out.append(sum(x[start + j] * w[j][:, None] for j in range(block)))
        begin = end
    return torch.stack(out)


@pytest.mark.parametrize("block, stride, ends", [(4, 2, [9, 20]), (4, 4, [3, 16]), (2, 1, [5])])
def test_matches_the_windows_and_their_gradients(block, stride, ends):
    g = torch.Generator().manual_seed(block + stride)
    x = torch.randn(ends[-1], 3, 8, generator=g)
    w = torch.randn(block, 3, generator=g)
    xr, wr = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    want = windows_written_out(xr, wr, block, stride, ends)
    xn, wn = x.npu().requires_grad_(True), w.npu().requires_grad_(True)
    out = torch_npu.npu_nsa_compress(xn, wn, block, stride, actual_seq_len=ends)
    torch.testing.assert_close(out.detach().cpu(), want.detach(), rtol=1e-5, atol=1e-5)
    upstream = torch.randn(want.shape, generator=g)
    want.backward(upstream)
    out.backward(upstream.npu())
    torch.testing.assert_close(xn.grad.cpu(), xr.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(wn.grad.cpu(), wr.grad, rtol=1e-5, atol=1e-5)


def test_refuses_lengths_that_do_not_end_at_t():
    x, w = torch.randn(10, 2, 4), torch.randn(4, 2)
    raises_operator_error(
        lambda: torch_npu.npu_nsa_compress(x.npu(), w.npu(), 4, 2, actual_seq_len=[5, 8]),
        "npu_nsa_compress: actual_seq_len must be non-decreasing cumulative lengths ending at T = 10, got [5, 8]",
    )


def test_infer_compresses_the_window_each_batch_completes():
    g = torch.Generator().manual_seed(7)
    page, block, stride = 8, 4, 2
    pages = torch.randn(6, page, 2, 4, generator=g).half()
    table = torch.tensor([[4, 1, 2], [0, 3, 5]], dtype=torch.int32)
    w = torch.randn(block, 2, generator=g).half()
    cache = torch.zeros(5, 2, 4).half()
    lengths = [10, 9]  # batch 0 completes a window (10 - 4 = 6, a multiple of 2); batch 1 does not
    npu_cache = cache.npu()
    torch_npu.npu_nsa_compress_infer(pages.npu(), w.npu(), torch.tensor([3, 1]).int().npu(), block, stride, page,
                                     block_table=table.npu(), actual_seq_len=lengths, cache=npu_cache)  # fmt: skip
    tokens = torch.cat([pages[4], pages[1]])[:10]  # batch 0's logical sequence
    want = cache.clone()
    want[3] = sum(tokens[6 + j].float() * w[j].float()[:, None] for j in range(block)).half()
    assert torch.equal(npu_cache.cpu(), want)
