"""The recurrent backward operators torch_npu exposes by name: npu_lstm_backward, npu_lstm_data_backward,
npu_lstm_cell_backward and npu_gru_backward, in torch_npu's output orders. The layers' are the vector-Jacobian
products of the forwards in rnn_layers (recomputing the layer); the cell's, whose biases are not inputs, is written
out from its saved gates.

npu_lstm_backward is not told the forward's direction nor has_biases: it takes the reading under which recomputing
the forward reproduces y_output. Inputs are time-major ([T, B, input]) as torch_npu's LSTM / GRU adaptation passes
them; an empty bias means a layer without biases."""

import torch

from torch_npu.ops.registration import npu_op
from torch_npu.ops.vjp import vjp

__all__ = []

_NPU = torch.ops.npu
_LSTM_SAVED = "Tensor y_output, Tensor h_output, Tensor c_output, Tensor i, Tensor j, Tensor f, Tensor o, Tensor tanhc"


def _lstm(x, weight, bias, h, c, has_biases, direction):
    return _NPU.npu_lstm(x, weight, bias, bias.new_empty(0), h, c, has_biases, 1, 0.0, True, False, False, False, direction)  # fmt: skip


def _lstm_reading(x, weight, bias, h, c, y_output):
    """(has_biases, direction) under which npu_lstm reproduces y_output most closely (exactly, for its own)."""
    readings = [(has_biases, direction) for has_biases in (bias.numel() > 0, False) for direction in (False, True)]
    readings = list(dict.fromkeys(readings))
    distance = []
    for has_biases, direction in readings:
        y = _lstm(x, weight, bias, h, c, has_biases, direction)[0]
        distance.append(
            float((y.float() - y_output.float()).abs().max()) if y.shape == y_output.shape else float("inf")
        )
    return readings[distance.index(min(distance))]


@npu_op(
    "npu_lstm_backward(Tensor? grady, Tensor? gradh, Tensor? gradc, Tensor input, Tensor weight, Tensor bias, "
    f"Tensor hx, Tensor cx, {_LSTM_SAVED}) -> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    fake=lambda grady, gradh, gradc, x, weight, bias, hx, cx, *saved: tuple(
        torch.empty_like(t) for t in (x, weight, bias, hx, cx)
    ),
)
def npu_lstm_backward(grady, gradh, gradc, x, weight, bias, hx, cx, y_output, h_output, c_output, i, j, f, o, tanhc):
    """(d input, d weight, d bias, d hx, d cx) of npu_lstm, from the gradients of its y, h and c."""
    has_biases, direction = _lstm_reading(x, weight, bias, hx, cx, y_output)
    forward = lambda *t: _lstm(*t, has_biases, direction)  # noqa: E731
    return tuple(vjp(forward, [x, weight, bias, hx, cx], range(5), [grady, gradh, gradc]))


@npu_op(
    "npu_lstm_data_backward(Tensor? grady_opt, Tensor? gradh_opt, Tensor? gradc_opt, Tensor input, "
    "Tensor batch_sizes, Tensor weight, Tensor bias, Tensor init_h, Tensor init_c, Tensor y, Tensor h, Tensor c, "
    "Tensor i, Tensor j, Tensor f, Tensor o, Tensor tanhc, bool flag_direction) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    fake=lambda grady, gradh, gradc, x, batch_sizes, weight, bias, h, c, *saved: tuple(
        torch.empty_like(t) for t in (x, weight, bias, h, c)
    ),
)
def npu_lstm_data_backward(grady_opt, gradh_opt, gradc_opt, x, batch_sizes, weight, bias, init_h, init_c, y, h, c,
                           i, j, f, o, tanhc, flag_direction):  # fmt: skip
    """(d input, d weight, d bias, d init_h, d init_c) of npu_lstm_data over the sequences batch_sizes describes."""
    has_biases = bias.numel() > 0

    def forward(x, weight, bias, h0, c0):
        return _NPU.npu_lstm_data(x, batch_sizes, weight, bias, bias.new_empty(0), h0, c0, has_biases, 1, 0.0, True,
                                  False, False, False, flag_direction)  # fmt: skip

    return tuple(vjp(forward, [x, weight, bias, init_h, init_c], range(5), [grady_opt, gradh_opt, gradc_opt]))


@npu_op(
    "npu_lstm_cell_backward(Tensor? grady, Tensor? gradh, Tensor? gradc, Tensor input, Tensor w_ih, Tensor w_hh, "
    f"Tensor h, Tensor c, {_LSTM_SAVED}) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    fake=lambda grady, gradh, gradc, x, w_ih, w_hh, h, c, *saved: (
        torch.empty_like(x),
        torch.empty_like(w_ih),
        torch.empty_like(w_hh),
        w_ih.new_empty(w_ih.shape[1]),
        w_ih.new_empty(w_ih.shape[1]),
        torch.empty_like(h),
        torch.empty_like(c),
    ),
)
def npu_lstm_cell_backward(grady, gradh, gradc, x, w_ih, w_hh, h, c, y_output, h_output, c_output, i, j, f, o, tanhc):
    """(d input, d w_ih, d w_hh, d b_ih, d b_hh, d h, d c) of npu_lstm_cell (w_ih [input, 4 * hidden], w_hh
    [hidden, 4 * hidden]) from its saved gates, [1, B, hidden] or [B, hidden]; gradients of y may be [1, B, hidden].
    The biases are not inputs; the two bias gradients are equal, both biases adding to the same gates."""
    batch, hidden = h.shape
    i, j, f, o, tanhc = (t.reshape(batch, hidden) for t in (i, j, f, o, tanhc))
    zero = torch.zeros_like(h)
    d_h = (zero if grady is None else grady.reshape(batch, hidden)) + (zero if gradh is None else gradh)
    d_o = d_h * tanhc
    d_c = (zero if gradc is None else gradc) + d_h * o * (1 - tanhc * tanhc)
    d_gates = torch.cat([d_c * j * i * (1 - i), d_c * c * f * (1 - f), d_c * i * (1 - j * j), d_o * o * (1 - o)], 1)
    d_bias = d_gates.sum(0)
    return d_gates @ w_ih.t(), x.t() @ d_gates, h.t() @ d_gates, d_bias, d_bias.clone(), d_gates @ w_hh.t(), d_c * f


@npu_op(
    "npu_gru_backward(Tensor? grady, Tensor? gradh, Tensor input, Tensor weight_input, Tensor weight_hidden, "
    "Tensor bias_input, Tensor bias_hidden, Tensor seq_length, Tensor hx, Tensor y_output, Tensor h_output, "
    "Tensor output_updata, Tensor output_reset, Tensor output_new, Tensor hidden_new) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    fake=lambda grady, gradh, x, w_in, w_hid, b_in, b_hid, seq_length, hx, *saved: tuple(
        torch.empty_like(t) for t in (w_in, w_hid, x, b_in, b_hid, hx)
    ),
)
def npu_gru_backward(grady, gradh, x, weight_input, weight_hidden, bias_input, bias_hidden, seq_length, hx,
                     y_output, h_output, output_updata, output_reset, output_new, hidden_new):  # fmt: skip
    """(d weight_input, d weight_hidden, d input, d bias_input, d bias_hidden, d hx) of npu_gru."""
    has_biases = bias_input.numel() > 0

    def forward(x, hx, w_in, w_hid, b_in, b_hid):
        return _NPU.npu_gru(x, hx, w_in, w_hid, b_in, b_hid, seq_length, has_biases, 1, 0.0, True, False, False)

    dx, dhx, dw_in, dw_hid, db_in, db_hid = vjp(
        forward, [x, hx, weight_input, weight_hidden, bias_input, bias_hidden], range(6), [grady, gradh]
    )
    return dw_in, dw_hid, dx, db_in, db_hid, dhx
