"""npu_quant_matmul_dequant / npu_quant_grouped_matmul_dequant against the golden of torch_npu's own tests
written out here: the activation quantised per token (dynamic) or per tensor (smooth scale), an int8 matmul,
dequantised by the activation and weight scales to float16."""

import torch

import torch_npu
from tests.error_cases import raises_operator_error

M, K, N = 12, 32, 16


def _inputs(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, K, generator=g).half()
    w = torch.randint(-128, 128, (N, K), generator=g, dtype=torch.int8)
    return g, x, w, torch.rand(N, generator=g) / 100


def golden(x, w, w_scale, x_scale, smooth=None):
    xs = x.float() * (smooth.float() if smooth is not None else 1.0)
    xq = torch.round(xs * (1.0 / x_scale.reshape(-1, 1))).clamp(-128, 127)
    return (xq @ w.float().t() * w_scale * x_scale.reshape(-1, 1)).half()


def test_dynamic_per_token():
    _, x, w, w_scale = _inputs(1)
    x_scale = x.float().abs().amax(-1) / 127.0
    got = torch_npu.npu_quant_matmul_dequant(x.npu(), w.npu(), w_scale.npu(), quant_mode="pertoken")
    torch.testing.assert_close(got.cpu(), golden(x, w, w_scale, x_scale), atol=1e-3, rtol=1e-3)


def test_static_per_tensor_with_smooth_scale_and_bias():
    g, x, w, w_scale = _inputs(2)
    smooth, x_scale, bias = torch.rand(K, generator=g).half() + 0.5, torch.tensor([0.02]), torch.randn(N, generator=g)
    want = (golden(x, w, w_scale, x_scale.expand(M), smooth).float() + bias).half()
    got = torch_npu.npu_quant_matmul_dequant(
        x.npu(), w.npu(), w_scale.npu(), bias=bias.npu(), x_scale=x_scale.npu(), smooth_scale=smooth.npu(),
        quant_mode="pertensor",
    )  # fmt: skip
    torch.testing.assert_close(got.cpu(), want, atol=1e-2, rtol=1e-3)


def test_grouped_rows_use_their_group_weight():
    g, x, _, _ = _inputs(3)
    w = torch.randint(-128, 128, (3, N, K), generator=g, dtype=torch.int8)
    w_scale = torch.rand(3, N, generator=g) / 100
    ends = [4, 4, 10]
    got = torch_npu.npu_quant_grouped_matmul_dequant(x.npu(), w.npu(), w_scale.npu(), torch.tensor(ends).npu())
    x_scale = x.float().abs().amax(-1) / 127.0
    for gi, (start, end) in enumerate(zip([0, *ends], ends)):
        if end > start:
            want = golden(x[start:end], w[gi], w_scale[gi], x_scale[start:end])
            torch.testing.assert_close(got[start:end].cpu(), want, atol=1e-3, rtol=1e-3)
    assert not got[10:].cpu().any()
    raises_operator_error(
        lambda: torch_npu.npu_quant_matmul_dequant(x.npu(), w[0].npu(), w_scale[0].npu(), quant_mode="pertensor"),
        "npu_quant_matmul_dequant: quant_mode 'pertensor' needs x_scale",
    )
