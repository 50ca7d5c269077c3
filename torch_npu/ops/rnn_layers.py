"""npu_lstm and npu_gru: one single-direction recurrent layer per call, returning the per-step states and gates
the card's backward reads.

npu_lstm: weight [input + hidden, 4 * hidden] is torch's weight_ih and weight_hh transposed and stacked,
bias [4 * hidden] is the one bias; gates in torch's order (i, f, g, o). Returns (y, h, c, i, j, f, o, tanh(c)),
each [T, B, hidden] per step (j is the cell candidate g). direction=True runs the sequence backwards (outputs
stay in time order). flag_seq=True (a per-step seq_mask) is not supported; npu_lstm_data takes it (sequences
of different lengths).
npu_gru: weight_input [input, 3 * hidden] and weight_hidden [hidden, 3 * hidden] are torch's weights
transposed, gates (r, z, n). Returns (y, h, update z, reset r, new n, W_hn h + b_hn), each [T, B, hidden].
Both compute as ATen's CPU recurrent layers do (the input projection of all steps in one matmul with its bias,
then per step the hidden projection plus it, the gate formulas in ATen's order), in the input's dtype, so they
equal torch's LSTM / GRU on npu bit for bit (on the card both run one kernel); differentiable through their
composition;
num_layers must be 1 and bidirectional False (torch_npu's nn.LSTM / nn.GRU adaptation calls them per layer
and direction).
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []


def _check_layer(op, x, num_layers, bidirectional):
    check(x.dim() == 3, op, f"input must be 3-D [T, B, input] (or [B, T, input] with batch_first), got {x.dim()}-D")
    check(num_layers == 1, op, f"one layer per call: num_layers must be 1, got {num_layers}")
    check(not bidirectional, op, "one direction per call: bidirectional must be False (use direction for the reverse)")


def _linear(x, weight, bias):
    """x @ weight (+ bias inside the one matmul, rounded once), as ATen's linear layers of its RNN cells."""
    return x @ weight if bias is None else torch.addmm(bias, x, weight)


def _sequence_projection(x, weight, bias):
    """The input projection of every step in one matmul [T, B, gates], as ATen's CPU recurrent layers compute it
    before stepping (per-step rows are the same numbers: each is its own dot products)."""
    steps, batch, size = x.shape
    return _linear(x.reshape(steps * batch, size), weight, bias).reshape(steps, batch, -1)


def _initial(state, batch, hidden, name, op):
    check(
        state.numel() == batch * hidden,
        op,
        f"{name} must hold [1, B={batch}, hidden={hidden}], got {tuple(state.shape)}",
    )
    return state.reshape(batch, hidden)


@npu_op(
    "npu_lstm(Tensor input, Tensor weight, Tensor bias, Tensor seq_mask, Tensor h, Tensor c, bool has_biases, "
    "int num_layers, float dropout, bool train, bool bidirectional, bool batch_first, bool flag_seq, "
    "bool direction) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    differentiable=True,
)
def npu_lstm(
    x,
    weight,
    bias,
    seq_mask,
    h,
    c,
    has_biases,
    num_layers,
    dropout,
    train,
    bidirectional,
    batch_first,
    flag_seq,
    direction,
):
    op = "npu_lstm"
    _check_layer(op, x, num_layers, bidirectional)
    check(not flag_seq, op, "flag_seq (a per-step seq_mask) is not supported by vnpu")
    return _lstm_layer(x, weight, bias, h, c, has_biases, batch_first, direction, None, op)


def _lstm_layer(x, weight, bias, h, c, has_biases, batch_first, direction, mask, op):
    """(y, h, c, i, j, f, o, tanhc) per step; mask [T, B, 1 or hidden] (1 = a real step) freezes the states of
    finished sequences and zeroes their outputs."""
    x = x.transpose(0, 1) if batch_first else x
    steps, batch, size = x.shape
    check(
        weight.dim() == 2 and weight.shape[0] > size and weight.shape[1] % 4 == 0,
        op,
        f"weight must be [input + hidden, 4 * hidden] with input={size}, got {tuple(weight.shape)}",
    )
    hidden = weight.shape[1] // 4
    check(weight.shape[0] == size + hidden, op, f"weight must have {size + hidden} rows, got {weight.shape[0]}")
    w_ih, w_hh = weight[:size], weight[size:]
    h_t, c_t = _initial(h, batch, hidden, "h", op), _initial(c, batch, hidden, "c", op)
    order = range(steps - 1, -1, -1) if direction else range(steps)
    records = {name: [None] * steps for name in ("y", "h", "c", "i", "j", "f", "o", "tanhc")}
    input_gates = _sequence_projection(x, w_ih, bias if has_biases else None)
    for t in order:
        gates = (h_t @ w_hh).add_(input_gates[t])
        i, f, g, o = gates.chunk(4, 1)
        i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
        c_new = f * c_t + i * g
        tanh_c = torch.tanh(c_new)
        h_new = o * tanh_c
        if mask is None:
            h_t, c_t, y_t = h_new, c_new, h_new
        else:
            keep = mask[t].to(h_new.dtype)
            h_t, c_t, y_t = keep * h_new + (1 - keep) * h_t, keep * c_new + (1 - keep) * c_t, keep * h_new
        for name, value in (("y", y_t), ("h", h_t), ("c", c_t), ("i", i), ("j", g), ("f", f), ("o", o), ("tanhc", tanh_c)):  # fmt: skip
            records[name][t] = value
    stacked = {name: torch.stack(values) for name, values in records.items()}
    y = stacked["y"].transpose(0, 1) if batch_first else stacked["y"]
    return (y, *(stacked[name] for name in ("h", "c", "i", "j", "f", "o", "tanhc")))


@npu_op(
    "npu_lstm_data(Tensor input, Tensor batch_sizes, Tensor weight, Tensor bias, Tensor seq_mask, Tensor h, "
    "Tensor c, bool has_biases, int num_layers, float dropout, bool train, bool bidirectional, bool batch_first, "
    "bool flag_seq, bool direction) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    differentiable=True,
)
def npu_lstm_data(x, batch_sizes, weight, bias, seq_mask, h, c, has_biases, num_layers, dropout, train,
                  bidirectional, batch_first, flag_seq, direction):  # fmt: skip
    """npu_lstm over padded sequences of different lengths (torch_npu's PackedSequence path): input [T, B, I];
    seq_mask [T, B, hidden] (flag_seq; 1 where step t belongs to sequence b), else the mask of batch_sizes
    (sequences active per step, longest first). Finished sequences keep their h and c and output zeros, so the
    last step's h / c are every sequence's final state; with direction each sequence runs from its own end."""
    op = "npu_lstm_data"
    _check_layer(op, x, num_layers, bidirectional)
    steps, batch = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
    if flag_seq:
        mask = seq_mask if seq_mask.dim() == 3 else seq_mask.reshape(steps, batch, -1)
    else:
        check(batch_sizes.numel() == steps, op, f"batch_sizes must hold one count per step ({steps}), got {batch_sizes.numel()}")  # fmt: skip
        active = batch_sizes.to(x.device).reshape(steps, 1)
        mask = (torch.arange(batch, device=x.device).reshape(1, batch) < active).unsqueeze(-1)
    return _lstm_layer(x, weight, bias, h, c, has_biases, batch_first, direction, mask, op)


@npu_op(
    "npu_gru(Tensor input, Tensor hx, Tensor weight_input, Tensor weight_hidden, Tensor bias_input, "
    "Tensor bias_hidden, Tensor seq_length, bool has_biases, int num_layers, float dropout, bool train, "
    "bool bidirectional, bool batch_first) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    differentiable=True,
)
def npu_gru(
    x,
    hx,
    weight_input,
    weight_hidden,
    bias_input,
    bias_hidden,
    seq_length,
    has_biases,
    num_layers,
    dropout,
    train,
    bidirectional,
    batch_first,
):
    op = "npu_gru"
    _check_layer(op, x, num_layers, bidirectional)
    x = x.transpose(0, 1) if batch_first else x
    steps, batch, size = x.shape
    check(
        weight_input.dim() == 2 and weight_input.shape[0] == size and weight_input.shape[1] % 3 == 0,
        op,
        f"weight_input must be [input={size}, 3 * hidden], got {tuple(weight_input.shape)}",
    )
    hidden = weight_input.shape[1] // 3
    check(
        tuple(weight_hidden.shape) == (hidden, 3 * hidden),
        op,
        f"weight_hidden must be [{hidden}, {3 * hidden}], got {tuple(weight_hidden.shape)}",
    )
    h_t = _initial(hx, batch, hidden, "hx", op)
    records = {name: [] for name in ("h", "z", "r", "n", "hn")}
    input_gates = _sequence_projection(x, weight_input, bias_input if has_biases else None)
    for t in range(steps):
        gh = _linear(h_t, weight_hidden, bias_hidden if has_biases else None)
        i_r, i_z, i_n = input_gates[t].chunk(3, 1)
        h_r, h_z, h_n = gh.chunk(3, 1)
        r, z = torch.sigmoid(h_r + i_r), torch.sigmoid(h_z + i_z)
        n = torch.tanh(i_n + h_n * r)
        h_t = (h_t - n) * z + n
        for name, value in (("h", h_t), ("z", z), ("r", r), ("n", n), ("hn", h_n)):
            records[name].append(value)
    stacked = {name: torch.stack(values) for name, values in records.items()}
    y = stacked["h"].transpose(0, 1) if batch_first else stacked["h"]
    return y, stacked["h"], stacked["z"], stacked["r"], stacked["n"], stacked["hn"]


@npu_op(
    "npu_lstm_cell(Tensor input, Tensor w_ih, Tensor w_hh, Tensor h, Tensor c, Tensor? b_ih=None, Tensor? b_hh=None) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    differentiable=True,
)
def npu_lstm_cell(x, w_ih, w_hh, h, c, b_ih=None, b_hh=None):
    """One LSTM step (DynamicRNNV2 with one step, as torch_npu's lstm_cell calls it with torch's weights
    transposed): w_ih [input, 4 * hidden], w_hh [hidden, 4 * hidden], gates i, f, g, o. Returns (y, h, c, i, j,
    f, o, tanh(c)): h and c [B, hidden], the others [1, B, hidden] (one time step; y = h, j the cell candidate g).
    Computed as ATen's cell (equal to torch's LSTMCell given the transposed weights)."""
    op = "npu_lstm_cell"
    check(x.dim() == 2 and h.dim() == 2 and c.shape == h.shape, op, "input must be [B, input], h and c [B, hidden]")
    hidden = h.shape[1]
    check(tuple(w_ih.shape) == (x.shape[1], 4 * hidden) and tuple(w_hh.shape) == (hidden, 4 * hidden), op,
          f"w_ih must be [input, 4 * hidden] = {[x.shape[1], 4 * hidden]} and w_hh [hidden, 4 * hidden] = {[hidden, 4 * hidden]}")  # fmt: skip
    gates = _linear(h, w_hh, b_hh).add_(_linear(x, w_ih, b_ih))
    i, f, g, o = gates.chunk(4, dim=1)
    i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
    c_next = f * c + i * g
    tanh_c = torch.tanh(c_next)
    h_next = o * tanh_c
    i, g, f, o, tanh_c = (t.unsqueeze(0) for t in (i, g, f, o, tanh_c))
    return h_next.unsqueeze(0).clone(), h_next, c_next, i, g, f, o, tanh_c  # y is its own tensor, as on the card
