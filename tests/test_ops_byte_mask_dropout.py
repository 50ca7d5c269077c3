"""dropout_with_byte_mask and _dropout_with_byte_mask(_backward): with the same seed the result and the gradient
equal F.dropout on the CPU bit for bit; the byte mask is what was kept; contrib's DropoutWithByteMask runs it."""

import pytest
import torch
import torch.nn.functional as F

import torch_npu
from tests.error_cases import raises_operator_error
from torch_npu.contrib.module import DropoutWithByteMask


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_equals_cpu_dropout_with_the_same_seed(p):
    x = torch.randn(40, 33)
    torch.manual_seed(11)
    cpu_leaf = x.clone().requires_grad_(True)
    want = F.dropout(cpu_leaf, p)
    want.backward(torch.ones_like(want))
    torch.npu.manual_seed(11)
    leaf = x.npu().requires_grad_(True)
    got = torch_npu.dropout_with_byte_mask(leaf, p, True)
    got.backward(torch.ones_like(got))
    assert torch.equal(got.detach().cpu(), want.detach())
    assert torch.equal(leaf.grad.cpu(), cpu_leaf.grad)


def test_mask_is_what_was_kept_and_backward_uses_it():
    x = torch.rand(8, 16).npu() + 1.0
    out, mask = torch_npu._dropout_with_byte_mask(x, 0.5)
    assert mask.dtype == torch.uint8 and mask.shape == x.shape
    assert torch.equal((out != 0).to(torch.uint8), mask)
    grad = torch_npu._dropout_with_byte_mask_backward(torch.ones_like(x), mask, 0.5)
    assert torch.equal(grad.cpu(), mask.cpu().float() * 2.0)


def test_eval_mode_is_identity_and_module_runs_it():
    x = torch.randn(4, 4).npu()
    assert torch.equal(torch_npu.dropout_with_byte_mask(x, 0.5, False), x)
    module = DropoutWithByteMask(p=0.25)
    torch.npu.manual_seed(2)
    got = module(x)
    torch.manual_seed(2)
    assert torch.equal(got.cpu(), F.dropout(x.cpu(), 0.25))
    raises_operator_error(
        lambda: torch_npu.dropout_with_byte_mask(x, 1.5, True), "dropout_with_byte_mask: p must be in [0, 1], got 1.5"
    )


def test_seeded_bit_mask_is_a_function_of_seed_and_offset():
    x = torch.randn(17, 19, device="npu")
    mask = torch_npu._npu_dropout_gen_mask(x, x.shape, 0.4, 2, 100, parallel=True)
    assert mask.dtype == torch.uint8 and mask.numel() == (17 * 19 + 127) // 128 * 16
    assert torch.equal(mask.cpu(), torch_npu._npu_dropout_gen_mask(x, x.shape, 0.4, 2, 100, parallel=False).cpu())
    assert not torch.equal(mask.cpu(), torch_npu._npu_dropout_gen_mask(x, x.shape, 0.4, 2, 101).cpu())
    kept = torch_npu.npu_dropout_do_mask(torch.ones(17, 19, device="npu"), mask, 0.4)[0].cpu() != 0
    assert 0.45 < kept.float().mean().item() < 0.75
    used_bytes = (17 * 19 + 7) // 8
    assert int(mask[used_bytes:].cpu().abs().sum()) == 0  # the padding bytes stay zero


def test_keep_everything_mask_has_ones_for_the_elements_and_zero_padding():
    full = torch_npu._npu_dropout_gen_mask(torch.empty(0, device="npu"), [32, 17], 0.0, 1, 0)
    used_bytes = (32 * 17 + 7) // 8
    assert full[:used_bytes].cpu().tolist() == [255] * used_bytes
    assert full[used_bytes:].cpu().tolist() == [0] * (full.numel() - used_bytes)
    plain = torch_npu.npu_dropout_gen_mask([32, 17], 0.0, device="npu")
    assert torch.equal(plain.cpu(), full.cpu())


def test_torch_nn_keeps_the_deprecated_names_warning_on_each_call():
    x = torch.randn(6, 5).npu()
    with pytest.warns(UserWarning) as caught:
        layer = torch.nn.DropoutWithByteMask(p=0.4)
    assert str(caught[0].message) == (
        "torch.nn.DropoutWithByteMask is deprecated and will be removed in future version. "
        "Use torch_npu.contrib.module.DropoutWithByteMask instead."
    )
    assert isinstance(layer, DropoutWithByteMask) and layer.p == 0.4
    torch.npu.manual_seed(5)
    with pytest.warns(UserWarning) as caught:
        got = torch.nn.functional.dropout_with_byte_mask(x, 0.4, True)
    assert str(caught[0].message) == (
        "torch.nn.functional.dropout_with_byte_mask is deprecated and will be removed in future version. "
        "Use torch_npu.contrib.function.dropout_with_byte_mask instead."
    )
    torch.npu.manual_seed(5)
    assert torch.equal(got.cpu(), layer(x).cpu())
