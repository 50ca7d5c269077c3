"""npu_dequant_swiglu_quant against dequantisation, SwiGLU (standard and GPT-OSS's variant) and per-token
dynamic int8 quantisation written out token by token."""

import pytest
import torch
import torch.nn.functional as F

import torch_npu


def reference(x, weight_scale, activation_scale, quant_scale, counts, activate_left, variant):
    ys, scales = [], []
    group_of = torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts))
    for t in range(x.shape[0]):
        if t >= len(group_of):
            ys.append(torch.zeros(x.shape[1] // 2, dtype=torch.int8))
            scales.append(torch.tensor(0.0))
            continue
        g = int(group_of[t]) if weight_scale.dim() == 2 else 0
        row = x[t].float() * (weight_scale[g] if weight_scale.dim() == 2 else weight_scale) * activation_scale[t]
        if variant:
            gate, linear = row[0::2].clamp(max=7.0), row[1::2].clamp(-7.0, 7.0)
            act = gate * torch.sigmoid(1.702 * gate) * (linear + 1.0)
        else:
            a, b = row.chunk(2)
            act = F.silu(a) * b if activate_left else a * F.silu(b)
        act = act * quant_scale[g if quant_scale.shape[0] > 1 else 0]
        scale = act.abs().max() / 127.0
        ys.append(torch.round(act / scale).clamp(-128, 127).to(torch.int8))
        scales.append(scale)
    return torch.stack(ys), torch.stack(scales)


@pytest.mark.parametrize("grouped", [False, True])
@pytest.mark.parametrize("activate_left, variant", [(False, False), (True, False), (False, True)])
def test_dequant_swiglu_quant_per_token(grouped, activate_left, variant):
    g = torch.Generator().manual_seed(7)
    x = torch.randint(-50, 50, (9, 16), generator=g, dtype=torch.int32)
    activation_scale = torch.rand(9, generator=g) * 0.1
    if grouped:
        counts = [3, 0, 4]
        weight_scale, quant_scale = torch.rand(3, 16, generator=g) * 0.1, torch.rand(3, 8, generator=g) + 0.5
        extra = {"group_index": torch.tensor(counts, dtype=torch.int64).npu()}
    else:
        counts = [9]
        weight_scale, quant_scale = torch.rand(16, generator=g) * 0.1, torch.rand(1, 8, generator=g) + 0.5
        extra = {}
    y, scale = torch_npu.npu_dequant_swiglu_quant(
        x.npu(),
        weight_scale=weight_scale.npu(),
        activation_scale=activation_scale.npu(),
        quant_scale=quant_scale.npu(),
        activate_left=activate_left,
        quant_mode=1,
        swiglu_mode=int(variant),
        **extra,
    )
    want_y, want_scale = reference(x, weight_scale, activation_scale, quant_scale, counts, activate_left, variant)
    assert y.dtype == torch.int8 and torch.equal(y.cpu(), want_y)
    torch.testing.assert_close(scale.cpu(), want_scale, rtol=1e-6, atol=0)


def test_dequant_swiglu_quant_refuses_static_quantisation():
    with pytest.raises(RuntimeError, match="^npu_dequant_swiglu_quant: quant_mode=0: vnpu supports dynamic"):
        torch_npu.npu_dequant_swiglu_quant(torch.ones(2, 4).npu())
    with pytest.raises(RuntimeError, match="an int32 x needs weight_scale and activation_scale"):
        torch_npu.npu_dequant_swiglu_quant(torch.ones(2, 4, dtype=torch.int32).npu(), quant_mode=1)
