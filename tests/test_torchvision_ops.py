"""torchvision on npu: its operators (nms, roi_align, roi_pool, ps_roi_*, deform_conv2d) compute on npu
tensors exactly what they compute on CPU tensors, forward and backward, and its models run.

Where torchvision's own C++ extension cannot load (PyPI's x86_64 wheels are CUDA builds), vnpu defines
torchvision's operators with its own CPU kernels; they are checked here against independent references
(torchvision's Python RoIAlign, plain convolution, loops written from the operators' definitions) and
against their own backwards with gradcheck.
"""

import inspect
import math

import pytest
import torch

torchvision = pytest.importorskip("torchvision", reason="torchvision is not installed (make test installs it)")
from torchvision import ops  # noqa: E402

import torch_npu  # noqa: E402,F401
from torch_npu._patches import applied_patches  # noqa: E402


def npu_copy(*tensors, grad=False):
    return [t.detach().npu().requires_grad_(grad and t.requires_grad) for t in tensors]


def random_boxes(n, size=40.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * size
    wh = torch.rand(n, 2, generator=g) * size / 2 + 1
    return torch.cat([xy, xy + wh], dim=1)


def random_rois(n, batch, size, seed=0):
    boxes = random_boxes(n, size, seed)
    index = torch.randint(0, batch, (n, 1), generator=torch.Generator().manual_seed(seed + 1)).float()
    return torch.cat([index, boxes], dim=1)


def test_torchvision_imports_and_reports_its_operators():
    assert torchvision.extension._has_ops()
    provided_by_vnpu = any(p.target == "torchvision.extension._has_ops" for p in applied_patches())
    cuda_build = "+cu" in torchvision.__version__
    # A CUDA wheel beside CPU torch cannot load its extension: vnpu's kernels must be the ones in use.
    assert provided_by_vnpu or not cuda_build
    if provided_by_vnpu:
        assert torch.ops.torchvision._cuda_version() == -1  # vnpu's kernels are CPU kernels


# --- nms ---------------------------------------------------------------------------------------


def reference_nms(boxes, scores, threshold):
    order = sorted(range(len(scores)), key=lambda i: -float(scores[i]))
    keep, removed = [], set()
    for a, i in enumerate(order):
        if i in removed:
            continue
        keep.append(i)
        for j in order[a + 1 :]:
            if j in removed:
                continue
            bi, bj = boxes[i].tolist(), boxes[j].tolist()
            w = max(0.0, min(bi[2], bj[2]) - max(bi[0], bj[0]))
            h = max(0.0, min(bi[3], bj[3]) - max(bi[1], bj[1]))
            inter = w * h
            union = (bi[2] - bi[0]) * (bi[3] - bi[1]) + (bj[2] - bj[0]) * (bj[3] - bj[1]) - inter
            if inter / union > threshold:
                removed.add(j)
    return keep


@pytest.mark.parametrize("threshold", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_nms_matches_a_reference_and_npu_equals_cpu(threshold, dtype):
    boxes = random_boxes(200, seed=3).to(dtype)
    scores = torch.rand(200, generator=torch.Generator().manual_seed(4), dtype=dtype)
    keep = ops.nms(boxes, scores, threshold)
    assert keep.dtype == torch.int64
    assert keep.tolist() == reference_nms(boxes.double(), scores, threshold)
    on_npu = ops.nms(*npu_copy(boxes, scores), threshold)
    assert on_npu.device.type == "npu" and torch.equal(on_npu.cpu(), keep)


def test_batched_nms_keeps_classes_apart_on_npu():
    boxes = random_boxes(60, seed=5)
    scores = torch.rand(60, generator=torch.Generator().manual_seed(6))
    classes = torch.arange(60) % 3
    cpu = ops.batched_nms(boxes, scores, classes, 0.3)
    npu = ops.batched_nms(*npu_copy(boxes, scores, classes), 0.3)
    assert torch.equal(npu.cpu(), cpu)
    for c in range(3):
        chosen = cpu[classes[cpu] == c]
        assert set(chosen.tolist()) <= set(torch.nonzero(classes == c).flatten().tolist())


def test_nms_edge_cases():
    empty = ops.nms(torch.zeros(0, 4, device="npu"), torch.zeros(0, device="npu"), 0.5)
    assert empty.shape == (0,) and empty.dtype == torch.int64 and empty.device.type == "npu"
    same = torch.tensor([[0.0, 0, 10, 10]] * 3, device="npu")
    assert ops.nms(same, torch.tensor([0.1, 0.9, 0.5], device="npu"), 0.5).tolist() == [1]


@pytest.mark.parametrize(
    "boxes,scores,message",
    [
        (torch.zeros(4), torch.zeros(4), "boxes should be a 2d tensor, got 1D"),
        (torch.zeros(4, 5), torch.zeros(4), "boxes should have 4 elements in dimension 1, got 5"),
        (torch.zeros(4, 4), torch.zeros(4, 1), "scores should be a 1d tensor, got 2D"),
        (
            torch.zeros(4, 4),
            torch.zeros(3),
            "boxes and scores should have same number of elements in dimension 0, " "got 4 and 3",
        ),
        (torch.zeros(4, 4), torch.zeros(4, dtype=torch.float64), "dets should have the same type as scores"),
    ],
)
@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_nms_errors(boxes, scores, message, device):
    with pytest.raises(RuntimeError, match=message):
        torch.ops.torchvision.nms(boxes.to(device), scores.to(device), 0.5)


# --- roi_align / ps_roi_align ------------------------------------------------------------------


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [-1, 0, 2])
@pytest.mark.parametrize("spatial_scale", [1.0, 0.25])
def test_roi_align_matches_torchvisions_python_reference(aligned, sampling_ratio, spatial_scale):
    # torchvision's Python RoIAlign treats samples beyond the map differently (it neither zeroes
    # them nor snaps them to the last pixel), so the boxes here stay inside; the border rules are
    # checked by hand below.
    from torchvision.ops.roi_align import _roi_align

    # The reference runs eagerly: torchvision wraps it in torch.compile, whose inductor compilations (one per
    # parameter combination) would cost far more than the comparison and check nothing of vnpu's.
    _roi_align = inspect.unwrap(_roi_align)
    x = torch.randn(2, 5, 12, 14, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    rois = random_rois(9, 2, 10 / spatial_scale, seed=8).double()
    out = ops.roi_align(x, rois, (3, 4), spatial_scale, sampling_ratio, aligned)
    ref = _roi_align(x, rois, spatial_scale, 3, 4, sampling_ratio, aligned)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_roi_align_border_rules(device):
    x = torch.tensor([[[[1.0, 2.0], [3.0, 4.0]]]], device=device)

    def one_bin(box, sampling_ratio):
        rois = torch.tensor([[0.0, *box]], device=device)
        return ops.roi_align(x, rois, 1, 1.0, sampling_ratio, False).item()

    assert one_bin([0, 0, 4, 4], 1) == 4.0  # sample at (2, 2): within one pixel of the map, snapped to (1, 1)
    assert one_bin([0, 0, 7, 7], 1) == 0.0  # sample at (3.5, 3.5): beyond the map, contributes nothing
    assert one_bin([0, 0, 6, 6], 2) == 1.0  # one of four samples is on the map (value 4): 4 / 4
    assert one_bin([0, 0, 1, 1], 1) == 2.5  # sample at (0.5, 0.5): the mean of the four pixels


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_roi_align_npu_equals_cpu_forward_and_backward(aligned, dtype):
    x = torch.randn(2, 6, 16, 16, generator=torch.Generator().manual_seed(9)).to(dtype).requires_grad_()
    rois = random_rois(7, 2, 16, seed=10).to(dtype)
    cpu = ops.roi_align(x, rois, 5, 1.0, 0, aligned)
    xn, rn = npu_copy(x, rois, grad=True)
    npu = ops.roi_align(xn, rn, 5, 1.0, 0, aligned)
    assert npu.device.type == "npu" and torch.equal(npu.cpu(), cpu)
    cot = torch.randn(cpu.shape, generator=torch.Generator().manual_seed(11)).to(dtype)
    cpu.backward(cot)
    npu.backward(cot.npu())
    assert torch.equal(xn.grad.cpu(), x.grad)


@pytest.mark.parametrize("op", ["roi_align", "ps_roi_align"])
def test_roi_align_backwards_pass_gradcheck(op):
    x = torch.randn(1, 8, 7, 9, dtype=torch.float64, generator=torch.Generator().manual_seed(12)).requires_grad_()
    rois = torch.tensor([[0, 0.3, 1.2, 5.7, 6.1], [0, 2.2, 0.4, 8.5, 4.9]], dtype=torch.float64)
    if op == "roi_align":
        fn = lambda t: ops.roi_align(t, rois, (2, 2), 1.0, 2, True)  # noqa: E731
    else:
        fn = lambda t: ops.ps_roi_align(t, rois, (2, 2), 1.0, 2)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (x,))
    rois = rois.npu()
    assert torch.autograd.gradcheck(fn, (x.detach().npu().requires_grad_(),))


def test_ps_roi_align_reads_one_input_channel_per_bin():
    # Input channel k is the constant k: bin (ph, pw) of output channel c reads channel (c*2 + ph)*2 + pw.
    x = torch.arange(8.0).view(1, 8, 1, 1).expand(1, 8, 6, 6).contiguous()
    rois = torch.tensor([[0, 0.5, 0.5, 4.5, 4.5]])
    out = ops.ps_roi_align(x.npu(), rois.npu(), 2, 1.0, 2)
    assert out.shape == (1, 2, 2, 2)
    assert out.cpu().flatten().tolist() == [float(k) for k in range(8)]
    assert torch.equal(out.cpu(), ops.ps_roi_align(x, rois, 2, 1.0, 2))


# --- roi_pool / ps_roi_pool --------------------------------------------------------------------


def reference_roi_pool(x, rois, pooled, scale):
    out = torch.zeros(len(rois), x.shape[1], pooled, pooled, dtype=x.dtype)
    for n, (b, *box) in enumerate(rois.tolist()):
        x1, y1, x2, y2 = (int(round(v * scale)) for v in box)
        height, width = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        for ph in range(pooled):
            for pw in range(pooled):
                h0 = min(max(math.floor(ph * height / pooled) + y1, 0), x.shape[2])
                h1 = min(max(math.ceil((ph + 1) * height / pooled) + y1, 0), x.shape[2])
                w0 = min(max(math.floor(pw * width / pooled) + x1, 0), x.shape[3])
                w1 = min(max(math.ceil((pw + 1) * width / pooled) + x1, 0), x.shape[3])
                if h1 > h0 and w1 > w0:
                    out[n, :, ph, pw] = x[int(b), :, h0:h1, w0:w1].amax(dim=(1, 2))
    return out


def test_roi_pool_matches_a_reference_and_npu_equals_cpu():
    x = torch.randn(2, 4, 20, 20, dtype=torch.float64, generator=torch.Generator().manual_seed(13))
    rois = random_rois(10, 2, 40, seed=14).double()
    out = ops.roi_pool(x, rois, 3, 0.5)
    torch.testing.assert_close(out, reference_roi_pool(x, rois, 3, 0.5), rtol=0, atol=0)
    xs = x.float().requires_grad_()
    cpu = ops.roi_pool(xs, rois.float(), 3, 0.5)
    xn, rn = npu_copy(xs, rois.float(), grad=True)
    npu = ops.roi_pool(xn, rn, 3, 0.5)
    assert torch.equal(npu.cpu(), cpu)
    cpu.sum().backward()
    npu.sum().backward()
    assert torch.equal(xn.grad.cpu(), xs.grad)


@pytest.mark.parametrize("op", ["roi_pool", "ps_roi_pool"])
def test_roi_pool_backwards_pass_gradcheck(op):
    # distinct values: the max of each bin is unique, so the function is differentiable there
    x = torch.randperm(8 * 8 * 8, generator=torch.Generator().manual_seed(15)).double().view(1, 8, 8, 8) / 100
    x.requires_grad_()
    rois = torch.tensor([[0, 0.0, 0.0, 6.0, 6.0], [0, 2.0, 1.0, 7.0, 5.0]], dtype=torch.float64)
    fn = (lambda t: ops.roi_pool(t, rois, 2, 1.0)) if op == "roi_pool" else (lambda t: ops.ps_roi_pool(t, rois, 2, 1.0))
    assert torch.autograd.gradcheck(fn, (x,))


def test_ps_roi_pool_averages_each_bin_of_its_channel():
    x = torch.randn(1, 4, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(16))
    rois = torch.tensor([[0, 1.0, 1.0, 5.0, 5.0]], dtype=torch.float64)
    out = ops.ps_roi_pool(x, rois, 2, 1.0)
    # box 1..5 (4 pixels, no +1), bins of 2 pixels; channel (ph * 2 + pw) for output channel 0
    for ph in range(2):
        for pw in range(2):
            patch = x[0, ph * 2 + pw, 1 + 2 * ph : 3 + 2 * ph, 1 + 2 * pw : 3 + 2 * pw]
            assert out[0, 0, ph, pw].item() == pytest.approx(patch.mean().item(), abs=1e-15)
    assert torch.equal(ops.ps_roi_pool(x.npu(), rois.npu(), 2, 1.0).cpu(), out)


# --- deform_conv2d -----------------------------------------------------------------------------


def deform_inputs(batch=3, channels=4, out_channels=6, groups=2, offset_groups=2, seed=17, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, channels, 9, 8, generator=g, dtype=dtype)
    weight = torch.randn(out_channels, channels // groups, 3, 3, generator=g, dtype=dtype)
    bias = torch.randn(out_channels, generator=g, dtype=dtype)
    offset = torch.randn(batch, offset_groups * 2 * 9, 5, 4, generator=g, dtype=dtype) * 2
    mask = torch.rand(batch, offset_groups * 9, 5, 4, generator=g, dtype=dtype)
    return x, weight, bias, offset, mask


def test_deform_conv2d_with_zero_offsets_is_a_convolution():
    x, weight, bias, offset, _ = deform_inputs()
    zero = torch.zeros_like(offset)
    out = ops.deform_conv2d(x, zero, weight, bias, stride=(2, 2), padding=(1, 1), dilation=(1, 1))
    ref = torch.nn.functional.conv2d(x, weight, bias, stride=2, padding=1, groups=2)
    torch.testing.assert_close(out, ref, rtol=1e-12, atol=1e-12)


def test_deform_conv2d_with_whole_pixel_offsets_shifts_the_input():
    x, weight, bias, _, _ = deform_inputs(groups=1, channels=2, offset_groups=1)
    offset = torch.zeros(3, 18, 7, 6, dtype=torch.float64)
    offset[:, 1::2] = 1.0  # every tap one pixel to the right
    out = ops.deform_conv2d(x, offset, weight, bias)
    shifted = torch.nn.functional.pad(x[..., 1:], (0, 1))
    torch.testing.assert_close(out, torch.nn.functional.conv2d(shifted, weight, bias), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("use_mask", [False, True])
def test_deform_conv2d_gradcheck(use_mask):
    x, weight, bias, offset, mask = deform_inputs(batch=2)
    args = [t.requires_grad_() for t in (x, offset, weight, bias)] + ([mask.requires_grad_()] if use_mask else [])

    def fn(x, offset, weight, bias, mask=None):
        return ops.deform_conv2d(x, offset, weight, bias, stride=(2, 2), padding=(1, 1), mask=mask)

    assert torch.autograd.gradcheck(fn, args)


@pytest.mark.parametrize("use_mask", [False, True])
@pytest.mark.parametrize("batch", [1, 4, 7])
def test_deform_conv2d_npu_equals_cpu_forward_and_backward(use_mask, batch):
    x, weight, bias, offset, mask = (
        t.float().requires_grad_() for t in deform_inputs(batch=batch, dtype=torch.float32)
    )
    mask = mask if use_mask else None
    cpu = ops.deform_conv2d(x, offset, weight, bias, stride=(2, 2), padding=(1, 1), mask=mask)
    moved = npu_copy(x, offset, weight, bias, *([mask] if use_mask else []), grad=True)
    npu = ops.deform_conv2d(*moved[:4], stride=(2, 2), padding=(1, 1), mask=moved[4] if use_mask else None)
    assert torch.equal(npu.cpu(), cpu)
    cpu.sum().backward()
    npu.sum().backward()
    for a, b in zip((x, offset, weight, bias) + ((mask,) if use_mask else ()), moved, strict=True):
        assert torch.equal(b.grad.cpu(), a.grad)


def test_deform_conv2d_errors_name_the_argument():
    x, weight, bias, offset, _ = deform_inputs()
    # torchvision derives the offset groups from offset.shape[1] // 18 (one here)
    with pytest.raises(RuntimeError, match="offset.shape\\[1\\] is not valid: got: 35 expected: 18"):
        ops.deform_conv2d(x.npu(), offset[:, :35].npu(), weight.npu(), bias.npu(), stride=2, padding=1)


def test_quantized_variants_are_refused_clearly():
    if not any(p.target == "torchvision.extension._has_ops" for p in applied_patches()):
        pytest.skip("torchvision's own extension is loaded here: its quantized kernels exist")
    q = torch.quantize_per_tensor(torch.rand(3, 4), 0.1, 0, torch.quint8)
    with pytest.raises(NotImplementedError, match="torchvision::qnms works on quantized tensors, which vnpu"):
        torch.ops.torchvision.qnms(q, torch.rand(3), 0.5)


# --- models ------------------------------------------------------------------------------------


def test_detection_model_runs_on_npu_as_on_cpu():
    # Faster R-CNN: nms in the region proposals and box heads, roi_align in MultiScaleRoIAlign.
    from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_320_fpn

    torch.manual_seed(0)
    model = fasterrcnn_mobilenet_v3_large_320_fpn(
        weights=None, weights_backbone=None, num_classes=5, box_score_thresh=0.0
    ).eval()
    images = [torch.rand(3, 96, 128, generator=torch.Generator().manual_seed(18))]
    with torch.no_grad():
        cpu = model(images)[0]
        npu = model.npu()([images[0].npu()])[0]
    assert npu["boxes"].device.type == "npu" and len(cpu["boxes"]) > 0
    for key in ("boxes", "scores", "labels"):
        assert torch.equal(npu[key].cpu(), cpu[key])


def test_classification_model_trains_on_npu_as_on_cpu():
    def run(device):
        torch.manual_seed(0)
        model = torchvision.models.resnet18(num_classes=4).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        g = torch.Generator().manual_seed(19)
        losses = []
        for _ in range(2):
            x, y = torch.randn(2, 3, 32, 32, generator=g), torch.randint(0, 4, (2,), generator=g)
            loss = torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    assert run("npu") == run("cpu")


def test_timm_models_import_and_run_on_npu():
    timm = pytest.importorskip("timm", reason="timm is not installed (make test installs it)")
    torch.manual_seed(0)
    model = timm.create_model("resnet10t", num_classes=3).eval()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        cpu = model(x)
        npu = model.npu()(x.npu())
    assert torch.equal(npu.cpu(), cpu)
