"""npu_swiglu_quant against SwiGLU, per-group smoothing and int8 quantisation written out row by row."""

import pytest
import torch
import torch.nn.functional as F

import torch_npu


def reference(x, smooth, offsets, group_ends, activate_left, dynamic):
    left, right = x.float().chunk(2, -1)
    act = F.silu(left) * right if activate_left else left * F.silu(right)
    rows = []
    for t in range(act.shape[0]):
        group = next((g for g, end in enumerate(group_ends) if t < end), None) if group_ends else 0
        row = act[t]
        if smooth is not None and group is not None:
            row = row * smooth[group]
            if not dynamic and offsets is not None:
                row = row + offsets[group]
        rows.append(row)
    act = torch.stack(rows)
    if dynamic:
        scale = 127.0 / act.abs().amax(-1)
        return torch.round(act * scale[:, None]).clamp(-128, 127).to(torch.int8), scale
    return torch.round(act).clamp(-128, 127).to(torch.int8), None


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("activate_left", [False, True])
@pytest.mark.parametrize("grouping", ["none", "cumsum", "count"])
def test_swiglu_quant_matches_the_row_by_row_reference(dynamic, activate_left, grouping):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(10, 16, generator=g) * 3
    smooth = torch.rand(3, 8, generator=g) + 0.5
    offsets = torch.randn(3, 8, generator=g)
    ends = [3, 5, 9]  # the last row belongs to no group
    kwargs = {"activate_left": activate_left, "quant_mode": int(dynamic)}
    if grouping == "none":
        smooth, offsets, ends = smooth[:1], offsets[:1], []
        kwargs.update(smooth_scales=smooth.npu(), offsets=offsets.npu())
    else:
        counts = [3, 2, 4] if grouping == "count" else ends
        kwargs.update(
            smooth_scales=smooth.npu(),
            offsets=offsets.npu(),
            group_index=torch.tensor(counts, dtype=torch.int32).npu(),
            group_list_type=1 if grouping == "count" else 0,
        )
    y, scale = torch_npu.npu_swiglu_quant(x.npu(), **kwargs)
    want_y, want_scale = reference(x, smooth, offsets, ends, activate_left, dynamic)
    assert y.dtype == torch.int8 and torch.equal(y.cpu(), want_y)
    if dynamic:
        torch.testing.assert_close(scale.cpu(), want_scale, rtol=1e-6, atol=0)
    else:
        assert scale.numel() == 0


def test_swiglu_quant_int4_and_errors():
    x = torch.randn(4, 32).npu()
    y, _ = torch_npu.npu_swiglu_quant(x, quant_mode=1, dst_type=torch.quint4x2)
    assert y.dtype == torch.int32 and y.shape == (4, 2)
    with pytest.raises(RuntimeError, match="^npu_swiglu_quant: the last dim of x must be even, got 5"):
        torch_npu.npu_swiglu_quant(torch.ones(2, 5).npu())
    with pytest.raises(RuntimeError, match="^npu_swiglu_quant: quant_mode must be 0 \\(static\\) or 1 \\(dynamic\\)"):
        torch_npu.npu_swiglu_quant(torch.ones(2, 4).npu(), quant_mode=2)
