"""npu_lstm and npu_gru against torch's own LSTM / GRU layers on the CPU (outputs, final states, gradients),
and their per-step gate outputs against the cell equations."""

import pytest
import torch
from torch import _VF

import torch_npu

T, B, INPUT, H = 5, 3, 6, 4


def _lstm_inputs(seed):
    g = torch.Generator().manual_seed(seed)
    x, h, c = (
        torch.randn(T, B, INPUT, generator=g),
        torch.randn(1, B, H, generator=g),
        torch.randn(1, B, H, generator=g),
    )
    w_ih, w_hh, bias = torch.randn(INPUT, 4 * H, generator=g), torch.randn(H, 4 * H, generator=g), torch.randn(4 * H)
    return x, h, c, w_ih, w_hh, bias


def _npu_lstm(x, h, c, weight, bias, batch_first=False, direction=False):
    seq = torch.tensor([x.shape[1] if batch_first else x.shape[0]], dtype=torch.int32, device=x.device)
    return torch_npu.npu_lstm(x, weight, bias, seq, h, c, True, 1, 0.0, True, False, batch_first, False, direction)


def test_lstm_matches_torch_and_its_cell_equations():
    x, h, c, w_ih, w_hh, bias = _lstm_inputs(0)
    out = _npu_lstm(x.npu(), h.npu(), c.npu(), torch.cat([w_ih, w_hh]).npu(), bias.npu())
    want, want_h, want_c = _VF.lstm(
        x, (h, c), (w_ih.t(), w_hh.t(), bias, torch.zeros(4 * H)), True, 1, 0.0, True, False, False
    )
    y, hs, cs, i, j, f, o, tanhc = (t.cpu() for t in out)
    torch.testing.assert_close(y, want, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(hs[-1], want_h[0], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(cs[-1], want_c[0], atol=1e-6, rtol=1e-5)
    previous_c = torch.cat([c, cs[:-1]])
    assert torch.equal(cs, f * previous_c + i * j)
    assert torch.equal(tanhc, torch.tanh(cs)) and torch.equal(hs, o * tanhc)


def test_lstm_reverse_direction_and_batch_first():
    x, h, c, w_ih, w_hh, bias = _lstm_inputs(1)
    weight = torch.cat([w_ih, w_hh]).npu()
    forward = _npu_lstm(x.flip(0).npu(), h.npu(), c.npu(), weight, bias.npu())
    backward = _npu_lstm(x.npu(), h.npu(), c.npu(), weight, bias.npu(), direction=True)
    assert torch.equal(backward[0].cpu(), forward[0].cpu().flip(0))
    batch_major = _npu_lstm(x.transpose(0, 1).npu(), h.npu(), c.npu(), weight, bias.npu(), batch_first=True)
    plain = _npu_lstm(x.npu(), h.npu(), c.npu(), weight, bias.npu())
    assert torch.equal(batch_major[0].cpu(), plain[0].cpu().transpose(0, 1))


def test_lstm_gradients_match_torch():
    x, h, c, w_ih, w_hh, bias = _lstm_inputs(2)
    leaves_npu = [t.npu().requires_grad_() for t in (x, torch.cat([w_ih, w_hh]), bias)]
    _npu_lstm(leaves_npu[0], h.npu(), c.npu(), leaves_npu[1], leaves_npu[2])[0].sum().backward()
    leaves = [t.clone().requires_grad_() for t in (x, w_ih.t().contiguous(), w_hh.t().contiguous(), bias)]
    _VF.lstm(
        leaves[0], (h, c), (leaves[1], leaves[2], leaves[3], torch.zeros(4 * H)), True, 1, 0.0, True, False, False
    )[0].sum().backward()
    torch.testing.assert_close(leaves_npu[0].grad.cpu(), leaves[0].grad, atol=1e-5, rtol=1e-5)
    weight_grad = torch.cat([leaves[1].grad.t(), leaves[2].grad.t()])
    torch.testing.assert_close(leaves_npu[1].grad.cpu(), weight_grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(leaves_npu[2].grad.cpu(), leaves[3].grad, atol=1e-5, rtol=1e-5)


def test_gru_matches_torch_with_its_gates():
    g = torch.Generator().manual_seed(3)
    x, h = torch.randn(T, B, INPUT, generator=g), torch.randn(1, B, H, generator=g)
    w_i, w_h = torch.randn(INPUT, 3 * H, generator=g), torch.randn(H, 3 * H, generator=g)
    b_i, b_h = torch.randn(3 * H, generator=g), torch.randn(3 * H, generator=g)
    seq = torch.tensor([T], dtype=torch.int32)
    y, hs, z, r, n, hn = (
        t.cpu()
        for t in torch_npu.npu_gru(
            x.npu(), h.npu(), w_i.npu(), w_h.npu(), b_i.npu(), b_h.npu(), seq.npu(), True, 1, 0.0, True, False, False
        )
    )
    want, want_h = _VF.gru(x, h, (w_i.t(), w_h.t(), b_i, b_h), True, 1, 0.0, True, False, False)
    torch.testing.assert_close(y, want, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(hs[-1], want_h[0], atol=1e-6, rtol=1e-5)
    previous = torch.cat([h, hs[:-1]])
    torch.testing.assert_close(hn, previous @ w_h[:, 2 * H :] + b_h[2 * H :], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(hs, (1 - z) * n + z * previous, atol=1e-6, rtol=1e-5)
    assert ((r > 0) & (r < 1)).all()


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda x, w, b, s, h: torch_npu.npu_lstm(x, w, b, s, h, h, True, 2, 0.0, True, False, False, False, False),
            "one layer per call: num_layers must be 1, got 2",
        ),
        (
            lambda x, w, b, s, h: torch_npu.npu_lstm(x, w, b, s, h, h, True, 1, 0.0, True, False, False, True, False),
            r"flag_seq \(a per-step seq_mask\) is not supported by vnpu",
        ),
        (
            lambda x, w, b, s, h: torch_npu.npu_lstm(
                x, w[:-1], b, s, h, h, True, 1, 0.0, True, False, False, False, False
            ),
            "weight must have 10 rows, got 9",
        ),
    ],
)
def test_lstm_errors(call, message):
    x, h, _, w_ih, w_hh, bias = _lstm_inputs(4)
    seq = torch.tensor([T], dtype=torch.int32, device="npu")
    with pytest.raises(RuntimeError, match=f"^npu_lstm: {message}"):
        call(x.npu(), torch.cat([w_ih, w_hh]).npu(), bias.npu(), seq, h.npu())


@pytest.mark.parametrize("direction", [False, True])
def test_half_precision_layers_equal_torchs_bit_for_bit(direction):
    # float16 LSTMs, and GRUs and LSTM cells of every dtype, run ATen's own cell loop on the CPU (float32 / bfloat16
    # LSTM layers go through oneDNN): the input projection of all steps in one matmul with its bias, then per
    # step the hidden projection plus it. torch_npu's own test compares npu_lstm with torch's LSTM on the card in
    # float16, where both are one kernel.
    g = torch.Generator().manual_seed(4)
    x, h, c = (torch.randn(*shape, generator=g).half() for shape in ((T, B, INPUT), (1, B, H), (1, B, H)))
    w_ih, w_hh, bias = (torch.randn(*shape, generator=g).half() for shape in ((INPUT, 4 * H), (H, 4 * H), (4 * H,)))
    out = _npu_lstm(x.npu(), h.npu(), c.npu(), torch.cat([w_ih, w_hh]).npu(), bias.npu(), direction=direction)
    steps = x.flip(0) if direction else x
    want = _VF.lstm(steps, (h, c), (w_ih.t(), w_hh.t(), bias, torch.zeros_like(bias)), True, 1, 0.0, True, False, False)
    y = out[0].cpu().flip(0) if direction else out[0].cpu()
    assert torch.equal(y, want[0]) and torch.equal(out[2].cpu()[0 if direction else -1], want[2][0])
    # the cell takes [input, 4 * hidden] weights, torch's transposed, as torch_npu's lstm_cell passes them
    cell = torch_npu.npu_lstm_cell(x[0].npu(), w_ih.npu(), w_hh.npu(), h[0].npu(), c[0].npu(), bias.npu(), bias.npu())
    want_h, want_c = torch._VF.lstm_cell(x[0], (h[0], c[0]), w_ih.t(), w_hh.t(), bias, bias)
    assert torch.equal(cell[1].cpu(), want_h) and torch.equal(cell[0].cpu(), want_h[None])
    assert torch.equal(cell[2].cpu(), want_c)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_gru_equals_torchs_bit_for_bit(dtype):
    g = torch.Generator().manual_seed(5)
    x, h = torch.randn(T, B, INPUT, generator=g).to(dtype), torch.randn(1, B, H, generator=g).to(dtype)
    w_i, w_h = torch.randn(INPUT, 3 * H, generator=g).to(dtype), torch.randn(H, 3 * H, generator=g).to(dtype)
    b_i, b_h = torch.randn(3 * H, generator=g).to(dtype), torch.randn(3 * H, generator=g).to(dtype)
    seq = torch.tensor([T], dtype=torch.int32, device="npu")
    out = torch_npu.npu_gru(x.npu(), h.npu(), w_i.npu(), w_h.npu(), b_i.npu(), b_h.npu(), seq, True, 1, 0.0, True, False, False)  # fmt: skip
    want, want_h = _VF.gru(x, h, (w_i.t(), w_h.t(), b_i, b_h), True, 1, 0.0, True, False, False)
    assert torch.equal(out[0].cpu(), want) and torch.equal(out[1].cpu()[-1], want_h[0])
