"""npu_lstm_cell against torch's LSTM cell kernel (nn.LSTMCell's, given the transposed weights torch_npu's lstm_cell
passes), its gate outputs written out, gradients through check_op, and its argument check."""

import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu


def reference(x, w_ih, w_hh, h, c, b_ih, b_hh):
    h_next, c_next = torch._VF.lstm_cell(x, (h, c), w_ih.t(), w_hh.t(), b_ih, b_hh)
    pre = x @ w_ih + b_ih + h @ w_hh + b_hh
    i, f, g, o = (gate[None] for gate in pre.chunk(4, 1))  # one time step: [1, B, hidden]
    return h_next[None], h_next, c_next, i.sigmoid(), g.tanh(), f.sigmoid(), o.sigmoid(), c_next.tanh()[None]


def test_matches_lstm_cell_with_gradients():
    g = torch.Generator().manual_seed(13)
    hidden, inputs, batch = 5, 3, 4
    args = (
        torch.randn(batch, inputs, generator=g), torch.randn(inputs, 4 * hidden, generator=g),
        torch.randn(hidden, 4 * hidden, generator=g), torch.randn(batch, hidden, generator=g),
        torch.randn(batch, hidden, generator=g), torch.randn(4 * hidden, generator=g), torch.randn(4 * hidden, generator=g),
    )  # fmt: skip
    check_op(torch_npu.npu_lstm_cell, args, reference, grad=(0, 1, 2, 3, 4, 5, 6), atol=1e-5, rtol=1e-5)


def test_bad_weights():
    x, h = torch.randn(2, 3).npu(), torch.zeros(2, 4).npu()
    raises_operator_error(
        lambda: torch_npu.npu_lstm_cell(x, torch.randn(16, 3).npu(), torch.randn(4, 16).npu(), h, h),
        "npu_lstm_cell: w_ih must be [input, 4 * hidden] = [3, 16] and w_hh [hidden, 4 * hidden] = [4, 16]",
    )
