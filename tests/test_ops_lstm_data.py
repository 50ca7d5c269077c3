"""npu_lstm_data (an LSTM layer over padded sequences of different lengths) against torch.nn.LSTM over a
PackedSequence on the CPU: outputs (zero past each sequence's end), final states, the reverse direction, and
gradients through the composition."""

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import torch_npu

T, B, IN, H = 5, 3, 4, 6
LENGTHS = [5, 3, 2]


def _weights(lstm, suffix=""):
    w_ih, w_hh = getattr(lstm, f"weight_ih_l0{suffix}"), getattr(lstm, f"weight_hh_l0{suffix}")
    bias = getattr(lstm, f"bias_ih_l0{suffix}") + getattr(lstm, f"bias_hh_l0{suffix}")
    return torch.cat([w_ih, w_hh], 1).t().detach(), bias.detach()


@pytest.mark.parametrize("use_seq_mask", [True, False])
def test_forward_direction_matches_packed_lstm(use_seq_mask):
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(IN, H)
    x = torch.randn(T, B, IN)
    out, (h_n, c_n) = lstm(pack_padded_sequence(x, LENGTHS))
    want, _ = pad_packed_sequence(out, total_length=T)
    weight, bias = _weights(lstm)
    batch_sizes = torch.tensor([sum(length > t for length in LENGTHS) for t in range(T)])
    mask = (torch.arange(T)[:, None] < torch.tensor(LENGTHS)[None, :]).float().unsqueeze(-1).expand(T, B, H)
    zeros = torch.zeros(1, B, H)
    y, h, c, *_ = torch_npu.npu_lstm_data(
        x.npu(), batch_sizes.npu(), weight.npu(), bias.npu(), mask.contiguous().npu(), zeros.npu(), zeros.npu(),
        True, 1, 0.0, False, False, False, use_seq_mask, False,
    )  # fmt: skip
    torch.testing.assert_close(y.cpu(), want.detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(h[-1].cpu(), h_n[0].detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(c[-1].cpu(), c_n[0].detach(), atol=1e-5, rtol=1e-5)


def test_reverse_direction_and_gradients():
    torch.manual_seed(1)
    lstm = torch.nn.LSTM(IN, H, bidirectional=True)
    x = torch.randn(T, B, IN, requires_grad=True)
    out, (h_n, _) = lstm(pack_padded_sequence(x, LENGTHS))
    padded, _ = pad_packed_sequence(out, total_length=T)
    want = padded[..., H:]  # the reverse direction
    weight, bias = _weights(lstm, "_reverse")
    batch_sizes = torch.tensor([sum(length > t for length in LENGTHS) for t in range(T)])
    zeros = torch.zeros(1, B, H)
    leaf = x.detach().npu().requires_grad_(True)
    y, h, *_ = torch_npu.npu_lstm_data(
        leaf, batch_sizes.npu(), weight.npu(), bias.npu(), torch.zeros(0).npu(), zeros.npu(), zeros.npu(),
        True, 1, 0.0, False, False, False, False, True,
    )  # fmt: skip
    torch.testing.assert_close(y.detach().cpu(), want.detach(), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(h[0].detach().cpu(), h_n[1].detach(), atol=1e-5, rtol=1e-5)
    upstream = torch.randn(T, B, H)
    want.backward(upstream)
    y.backward(upstream.npu())
    torch.testing.assert_close(leaf.grad.cpu(), x.grad, atol=1e-5, rtol=1e-5)
