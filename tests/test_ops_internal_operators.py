"""The underscore operators torch_npu's own Python calls, each against what it stands for."""

import pytest
import torch

import torch_npu

NPU = "npu"


def test_dtype_cast_and_its_backward_operator():
    x = torch.randn(4, 3, device=NPU, requires_grad=True)
    y = torch.ops.npu._npu_dtype_cast(x, torch.float16)
    assert y.dtype == torch.float16 and torch.equal(y.cpu(), x.detach().cpu().half())
    dy = torch.randn(4, 3, dtype=torch.float16, device=NPU)
    y.backward(dy)
    assert x.grad.dtype == torch.float32 and torch.equal(x.grad.cpu(), dy.cpu().float())
    assert torch.equal(torch.ops.npu._npu_dtype_cast_backward(dy, torch.float32).cpu(), dy.cpu().float())


def test_amp_non_finite_check():
    finite = [torch.randn(3, device=NPU), torch.empty(0, device=NPU)]
    assert torch.ops.npu._amp_foreach_non_finite_check(finite) is False
    assert torch.ops.npu._amp_foreach_non_finite_check([*finite, torch.tensor([1.0, float("inf")], device=NPU)])
    assert torch.ops.npu._amp_foreach_non_finite_check([torch.tensor([float("nan")], device=NPU)])


def test_ciou_with_its_atan_difference():
    g = torch.Generator().manual_seed(0)
    xy, wh = torch.rand(5, 2, generator=g) * 10, torch.rand(5, 2, generator=g) * 4 + 0.5
    boxes = torch.cat([xy, xy + wh], 1).t().contiguous()
    gt = torch.cat([xy + 1, xy + 1 + wh.flip(1)], 1).t().contiguous()
    ciou, atan_sub = torch_npu._npu_ciou(boxes.npu(), gt.npu(), is_cross=False)
    assert torch.equal(ciou.cpu(), torch_npu.npu_ciou(boxes.npu(), gt.npu(), is_cross=False).cpu())
    w, h = boxes[2] - boxes[0], boxes[3] - boxes[1]
    wg, hg = gt[2] - gt[0], gt[3] - gt[1]
    torch.testing.assert_close(atan_sub.cpu(), (torch.atan(wg / hg) - torch.atan(w / h))[None, :])


def test_moe_token_unpermute_keeps_the_tokens_for_the_backward():
    tokens = torch.randn(6, 4, device=NPU)
    order = torch.tensor([3, 0, 5, 1, 4, 2], dtype=torch.int32, device=NPU)
    probs = torch.rand(3, 2, device=NPU)
    out, kept = torch_npu._npu_moe_token_unpermute(tokens, order, probs)
    assert torch.equal(out.cpu(), torch_npu.npu_moe_token_unpermute(tokens, order, probs).cpu())
    assert torch.equal(kept.cpu(), tokens.cpu()) and kept.data_ptr() != tokens.data_ptr()


def test_fusion_attention_v3_capture_helpers():
    q = torch.randn(2, 2, 4, 8, device=NPU)
    out = torch_npu.npu_fusion_attention_v3(q, q, q, 2, "BNSD", scale=0.3)
    shapes = torch.ops.npu._npu_fusion_attention_v3_infer_output(q, q, q, 2, "BNSD")
    assert [tuple(t.shape) for t in shapes] == [tuple(t.shape) for t in out[:3]]
    assert [t.dtype for t in shapes] == [t.dtype for t in out[:3]]
    sink = torch.zeros(2, device=NPU)
    grads = torch.ops.npu._npu_fusion_attention_grad_v3_infer_output(q, q, q, None, sink)
    assert [tuple(t.shape) for t in grads] == [tuple(q.shape)] * 3 + [(0,), (2,)]
    workspace = torch.ops.npu._npu_fusion_attention_v3_get_max_workspace(q, q, q, 2, "BNSD")
    grad_workspace = torch.ops.npu._npu_fusion_attention_grad_v3_get_max_workspace(q, q, q, q, 2, "BNSD")
    assert workspace.numel() == 0 and grad_workspace.numel() == 0


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
def test_quantize_impl_out_writes_torchs_quantised_integers():
    x = torch.randn(4, 6) * 20
    for dtype, int_dtype in ((torch.qint8, torch.int8), (torch.quint8, torch.uint8), (torch.qint32, torch.int32)):
        result = torch.empty(0, dtype=int_dtype, device=NPU)
        torch.ops.npu._quantize_per_tensor_impl.out(
            x.npu(), torch.tensor([0.25], device=NPU), torch.tensor([3], device=NPU), dtype, result=result
        )
        assert torch.equal(result.cpu(), torch.quantize_per_tensor(x, 0.25, 3, dtype).int_repr())
        scales, zero_points = torch.tensor([0.1, 0.5, 0.25, 1.0, 0.3, 0.2]), torch.tensor([0, 1, 2, 3, 4, 5])
        torch.ops.npu._quantize_per_channel_impl.out(x.npu(), scales.npu(), zero_points.npu(), 1, dtype, result=result)
        assert torch.equal(result.cpu(), torch.quantize_per_channel(x, scales, zero_points, 1, dtype).int_repr())
