"""npu_mhc_post against mHC's output mapping written out with einsum (gradients included, through
npu_mhc_post_backward), without h_res, and its argument checks."""

import pytest
import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu


def reference(x, h_res, h_out, h_post):
    mixed = x.float() if h_res is None else torch.einsum("...ij,...id->...jd", h_res, x.float())
    return (mixed + torch.einsum("...j,...d->...jd", h_post, h_out.float())).to(x.dtype)


def _inputs(lead, n=4, d=16, dtype=torch.float16, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(*lead, n, d, generator=g).to(dtype)
    h_res = torch.rand(*lead, n, n, generator=g)
    h_out = torch.rand(*lead, d, generator=g).to(dtype)
    h_post = torch.rand(*lead, n, generator=g)
    return x, h_res, h_out, h_post


@pytest.mark.parametrize("lead", [(6,), (2, 3)])
def test_matches_the_composition_with_gradients(lead):
    check_op(torch_npu.npu_mhc_post, _inputs(lead), reference, grad=(0, 1, 2, 3), atol=2e-3, rtol=2e-3)


def test_without_h_res_and_in_bfloat16():
    x, _, h_out, h_post = _inputs((5,), dtype=torch.bfloat16, seed=1)
    got = torch_npu.npu_mhc_post(x.npu(), None, h_out.npu(), h_post.npu())
    torch.testing.assert_close(got.cpu(), reference(x, None, h_out, h_post), atol=0, rtol=0)
    xg, og, pg = (t.npu().requires_grad_(True) for t in (x.float(), h_out.float(), h_post))
    torch_npu.npu_mhc_post(xg.half(), None, og.half(), pg).float().sum().backward()
    assert torch.equal(xg.grad.cpu(), torch.ones_like(x.float())) and pg.grad.shape == h_post.shape


def test_bad_arguments():
    x, h_res, h_out, h_post = (t.npu() for t in _inputs((3,)))
    raises_operator_error(
        lambda: torch_npu.npu_mhc_post(x.float(), h_res, h_out, h_post),
        "npu_mhc_post: x must be float16 or bfloat16, got torch.float32",
    )
    raises_operator_error(
        lambda: torch_npu.npu_mhc_post(x, h_res, h_out, h_post[:, :2]),
        "npu_mhc_post: h_post must be float32 [3, 4], got [3, 2] torch.float32",
    )
    raises_operator_error(
        lambda: torch_npu.npu_mhc_post(x, h_res.half(), h_out, h_post),
        "npu_mhc_post: h_res must be float32 [3, 4, 4], got [3, 4, 4] torch.float16",
    )
