"""npu_batch_gather_matmul(_) against each row's LoRA product written out with its own adapter."""

import pytest
import torch

import torch_npu

W, L, H1, R, H2 = 3, 2, 16, 4, 8


def _inputs(seed, batch=5):
    g = torch.Generator().manual_seed(seed)
    y = torch.randn(batch, 3 * H2, generator=g).half()
    x = torch.randn(batch, H1, generator=g).half()
    weight_a = (torch.randn(W, L, R, H1, generator=g) * 0.3).half()
    weight_b = (torch.randn(W, L, H2, R, generator=g) * 0.3).half()
    indices = torch.tensor([0, 2, W, 1, 2][:batch], dtype=torch.int32)
    return y, x, weight_a, weight_b, indices


def reference(y, x, weight_a, weight_b, indices, layer, scale, offset, lora_a=True):
    out = y.float().clone()
    for i, a in enumerate(indices.tolist()):
        if a == W:
            continue
        h = x[i].float()
        if lora_a:
            h = weight_a[a, layer].float() @ h
        out[i, offset : offset + H2] += (weight_b[a, layer].float() @ h) * scale
    return out


@pytest.mark.parametrize("layer, offset", [(0, 0), (1, 8)])
def test_each_row_gets_its_adapters_product(layer, offset):
    y, x, weight_a, weight_b, indices = _inputs(layer)
    args = dict(weight_a=weight_a.npu(), layer_idx=layer, scale=0.5, y_offset=offset, y_slice_size=H2)
    got = torch_npu.npu_batch_gather_matmul(y.npu(), x.npu(), weight_b.npu(), indices.npu(), **args)
    want = reference(y, x, weight_a, weight_b, indices, layer, 0.5, offset)
    torch.testing.assert_close(got.cpu().float(), want, rtol=2e-3, atol=2e-3)
    target = y.npu()
    assert torch_npu.npu_batch_gather_matmul_(target, x.npu(), weight_b.npu(), indices.npu(), **args) is target
    assert torch.equal(target.cpu(), got.cpu())


def test_without_weight_a_weight_b_multiplies_x():
    y, x, _, _, indices = _inputs(3)
    weight_b = (torch.randn(W, L, H2, H1) * 0.3).half()
    got = torch_npu.npu_batch_gather_matmul(y.npu(), x.npu(), weight_b.npu(), indices.npu(), y_slice_size=H2)
    want = reference(y, x, None, weight_b, indices, 0, 1e-3, 0, lora_a=False)
    torch.testing.assert_close(got.cpu().float(), want, rtol=2e-3, atol=2e-3)


def test_indices_past_the_adapters_are_refused():
    y, x, weight_a, weight_b, _ = _inputs(4)
    bad = torch.tensor([0, 1, 4, 0, 0], dtype=torch.int32)
    with pytest.raises(RuntimeError, match=r"^npu_batch_gather_matmul: indices must be in \[0, 3\]"):
        torch_npu.npu_batch_gather_matmul(
            y.npu(), x.npu(), weight_b.npu(), bad.npu(), weight_a=weight_a.npu(), y_slice_size=H2
        )
