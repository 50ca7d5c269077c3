"""npu_ifmr (int8 scale calibration) against the candidate search written out here step by step, and
npu_stride_add against slicing, zero padding and adding."""

import pytest
import torch

import torch_npu


def ref_ifmr(data, data_min, data_max, cumsum, min_pct, max_pct, start, end, step, with_offset):
    cdf = cumsum.double() / data.numel()
    bins = cumsum.numel()
    max_index = int((cdf < max_pct).sum())
    min_index = int((cdf < 1 - min_pct).sum())
    low, high = float(data_min), float(data_max)
    max_init = torch.tensor(max_index / bins * (high - low) + low, dtype=torch.float32)
    min_init = torch.tensor(min_index / bins * (high - low) + low, dtype=torch.float32)
    candidates = []
    for s in torch.arange(start, end, step):
        if with_offset:
            top, bottom = max(float(max_init), 0.0) * float(s), min(float(min_init), 0.0)
            scale = (top - bottom) / 255
            scale = 1.0 if scale < 1.192092896e-07 else scale
            offset = -(round(bottom / scale) + 128)
        else:
            scale, offset = max(abs(float(max_init)), abs(float(min_init))) * float(s) / 127, 0.0
        q = ((data.double() / scale).round() + offset).clamp(-128, 127)
        loss = float((((q - offset) * scale - data.double()) ** 2).sum())
        candidates.append((loss, scale, offset))
    losses = torch.tensor([c[0] for c in candidates])
    best = candidates[int(torch.argmin(losses))]
    return best[1], best[2]


@pytest.mark.parametrize("with_offset", [False, True])
@pytest.mark.parametrize("low, high", [(-1.0, 1.0), (0.2, 3.0)])
def test_ifmr_finds_the_scale_with_the_smallest_round_trip_error(with_offset, low, high):
    g = torch.Generator().manual_seed(0)
    data = torch.rand(2, 2, 8, 8, generator=g) * (high - low) + low
    data_min, data_max = data.min().reshape(1), data.max().reshape(1)
    cumsum = torch.cumsum(torch.histc(data, bins=128, min=float(data_min), max=float(data_max)), 0).int()
    scale, offset = torch_npu.npu_ifmr(
        data.npu(), data_min.npu(), data_max.npu(), cumsum.npu(), 0.999999, 0.999999, 0.7, 1.3, 0.01, with_offset
    )
    assert scale.shape == (1,) and offset.shape == (1,) and scale.dtype == torch.float32
    want_scale, want_offset = ref_ifmr(
        data, data_min, data_max, cumsum, 0.999999, 0.999999, 0.7, 1.3, 0.01, with_offset
    )
    torch.testing.assert_close(float(scale), want_scale, rtol=1e-5, atol=0)
    assert float(offset) == want_offset
    if not with_offset:
        assert float(offset) == 0.0


def test_ifmr_refuses_an_empty_search():
    x = torch.rand(4, device="npu")
    with pytest.raises(RuntimeError, match=r"^npu_ifmr: the search range \[1.3, 0.7\) with step 0.01 is empty"):
        torch_npu.npu_ifmr(
            x,
            x.min().reshape(1),
            x.max().reshape(1),
            torch.ones(8, dtype=torch.int32, device="npu"),
            0.99,
            0.99,
            1.3,
            0.7,
            0.01,
            False,
        )


def test_stride_add_pads_each_slice_to_the_c1_length():
    g = torch.Generator().manual_seed(1)
    x1, x2 = torch.randn(2, 5, 3, 3, 16, generator=g), torch.randn(2, 7, 3, 3, 16, generator=g)
    out = torch_npu.npu_stride_add(x1.npu(), x2.npu(), 1, 3, 1)
    want = torch.zeros(2, 16, 3, 3, 16)
    want[:, :4] += x1[:, 1:]
    want[:, :4] += x2[:, 3:]
    assert out.shape == (2, 16, 3, 3, 16)
    assert torch.equal(out.cpu(), want)
    one = torch.tensor([[[[[1.0]]]]])
    assert torch.equal(
        torch_npu.npu_stride_add(one.npu(), one.npu(), 0, 0, 1).cpu().flatten()[:2], torch.tensor([2.0, 0])
    )


def test_stride_add_refuses_slices_wider_than_c1_len():
    x = torch.randn(1, 20, 1, 1, 1, device="npu")
    with pytest.raises(RuntimeError, match=r"^npu_stride_add: self\[:, 2:\] has 18 channels, more than 16"):
        torch_npu.npu_stride_add(x, x, 2, 8, 1)
