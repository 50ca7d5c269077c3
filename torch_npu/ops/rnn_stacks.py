"""_lstm_npu and _lstm_npu_backward: op-plugin's whole LSTM (every layer and direction in one call, aclnnLSTM),
which torch_npu's aten::lstm runs on the card.

_lstm_npu(input, hx=[h0, c0], params, ...) takes torch's LSTM weights as nn.LSTM lists them (per layer and
direction: weight_ih [4 * hidden, input], weight_hh [4 * hidden, hidden], and with has_biases bias_ih, bias_hh),
h0 / c0 [layers * directions, B, hidden], and returns (y [T, B, directions * hidden] (batch_first: [B, T, ...]),
h_n, c_n [layers * directions, B, hidden], then per layer and direction the per-step i, j (the cell candidate g),
f, o, h, c and tanh(c), stacked [layers * directions, T, B, hidden]). In eval (train=False) the gates and tanh(c)
are empty, as the card does not keep them. Each layer computes as npu_lstm (torch's cell, in the input's dtype).
Refused with an error naming them: dropout between layers while training (the card's backward is given no mask)
and packed sequences (batch_sizes); vnpu's nn.LSTM runs through ATen's LSTM, which handles both.

_lstm_npu_backward returns (d input, [d h0, d c0], d params) — the vector-Jacobian product of the same
composition, one operator (the gates it is given are what the card's kernel reads; vnpu recomputes them)."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import _library, npu_op
from torch_npu.ops.rnn_layers import _lstm_layer
from torch_npu.ops.vjp import vjp

__all__ = []

_OP = "_lstm_npu"
_GATES = ("i", "j", "f", "o", "h", "c", "tanhc")


def _layer_params(params, has_biases, layers, directions):
    """[(weight [input + hidden, 4 * hidden], bias [4 * hidden] or empty)] per layer and direction."""
    per = 4 if has_biases else 2
    check(len(params) == per * layers * directions, _OP, f"params must hold {per} tensors per layer and direction ({per * layers * directions}), got {len(params)} (projections are not supported)")  # fmt: skip
    stacked = []
    for k in range(layers * directions):
        w_ih, w_hh, *biases = params[per * k : per * (k + 1)]
        bias = biases[0] + biases[1] if has_biases else w_ih.new_empty(0)
        stacked.append((torch.cat([w_ih.t(), w_hh.t()]), bias))
    return stacked


def _stack(x, h0, c0, params, has_biases, num_layers, dropout, train, bidirectional, batch_first, batch_sizes):
    """(y, h_n, c_n, {gate name: [layers * directions] per-step tensors})."""
    check(batch_sizes is None, _OP, "packed sequences (batch_sizes) are not modelled by vnpu; nn.LSTM runs them through ATen")  # fmt: skip
    check(not (train and dropout > 0 and num_layers > 1), _OP, f"dropout={dropout} between layers while training is not modelled by vnpu (the card's backward is given no mask)")  # fmt: skip
    check(x.dim() == 3, _OP, f"input must be 3-D [T, B, input] (or [B, T, input] with batch_first), got {x.dim()}-D")
    directions = 2 if bidirectional else 1
    weights = _layer_params(params, has_biases, num_layers, directions)
    layer_input = x.transpose(0, 1) if batch_first else x
    finals, records = {"h": [], "c": []}, {name: [] for name in _GATES}
    for layer in range(num_layers):
        outputs = []
        for direction in range(directions):
            k = layer * directions + direction
            weight, bias = weights[k]
            y, *steps = _lstm_layer(layer_input, weight, bias, h0[k], c0[k], has_biases, False, bool(direction), None, _OP)  # fmt: skip
            for name, value in zip(("h", "c", "i", "j", "f", "o", "tanhc"), steps, strict=True):
                records[name].append(value)
            last = 0 if direction else -1  # the reverse direction ends at the first step
            finals["h"].append(steps[0][last])
            finals["c"].append(steps[1][last])
            outputs.append(y)
        layer_input = torch.cat(outputs, dim=-1)
    y = layer_input.transpose(0, 1) if batch_first else layer_input
    return y, torch.stack(finals["h"]), torch.stack(finals["c"]), records


_ARGS = (
    "Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, bool bidirectional, *, "
    "bool? batch_first=False, Tensor? batch_sizes=None"
)


@npu_op(f"_lstm_npu(Tensor input, Tensor[] hx, {_ARGS}) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)")  # fmt: skip
def _lstm_npu(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, *, batch_first=False,
              batch_sizes=None):  # fmt: skip
    """(y, h_n, c_n, i, j, f, o, h, c, tanhc): see the module doc."""
    check(len(hx) == 2, _OP, f"hx must be [h0, c0], got {len(hx)} tensors")
    y, h_n, c_n, records = _stack(input, hx[0], hx[1], params, has_biases, num_layers, dropout, train,
                                  bidirectional, bool(batch_first), batch_sizes)  # fmt: skip
    kept = {name: torch.stack(values) for name, values in records.items()}
    empty = input.new_empty(0)
    gates = [kept[name] if train else empty for name in ("i", "j", "f", "o")]
    return y, h_n, c_n, *gates, kept["h"], kept["c"], kept["tanhc"] if train else empty


def _stack_outputs(x, h0, c0, *params, options):
    return _stack(x, h0, c0, list(params), **options)[:3]


@npu_op(
    "_lstm_npu_backward(Tensor grad_y, Tensor grad_hy, Tensor grad_cy, Tensor input, Tensor[] hx, Tensor[] params, "
    "Tensor i, Tensor j, Tensor f, Tensor o, Tensor h, Tensor c, Tensor tanhc, bool has_biases, int num_layers, "
    "float dropout, bool train, bool bidirectional, *, bool? batch_first=False, Tensor? batch_sizes=None) "
    "-> (Tensor, Tensor[], Tensor[])",
    fake=lambda grad_y, grad_hy, grad_cy, input, hx, params, *args, **kwargs: (
        torch.empty_like(input),
        [torch.empty_like(t) for t in hx],
        [torch.empty_like(t) for t in params],
    ),  # fmt: skip
)
def _lstm_npu_backward(grad_y, grad_hy, grad_cy, input, hx, params, i, j, f, o, h, c, tanhc, has_biases,
                       num_layers, dropout, train, bidirectional, *, batch_first=False, batch_sizes=None):  # fmt: skip
    """(d input, [d h0, d c0], d params) of _lstm_npu's (y, h_n, c_n)."""
    options = dict(has_biases=has_biases, num_layers=num_layers, dropout=dropout, train=train,
                   bidirectional=bidirectional, batch_first=bool(batch_first), batch_sizes=batch_sizes)  # fmt: skip
    inputs = [input, hx[0], hx[1], *params]
    grads = vjp(lambda *t: _stack_outputs(*t, options=options), inputs, range(len(inputs)), [grad_y, grad_hy, grad_cy])  # fmt: skip
    return grads[0], list(grads[1:3]), list(grads[3:])


class LstmNpu(torch.autograd.Function):  # (its grad_fn is LstmNpuBackward, as torch_npu names it)
    """_lstm_npu's Autograd kernel: hx and params travel as separate tensors (autograd tracks no list), and the
    backward is the one _lstm_npu_backward operator."""

    @staticmethod
    def forward(ctx, options, input, h0, c0, *params):
        with torch._C._AutoDispatchBelowAutograd():
            outputs = torch.ops.npu._lstm_npu(input, [h0, c0], list(params), **options)
        ctx.options, ctx.shapes = options, [o.shape for o in outputs[:3]]
        ctx.save_for_backward(input, h0, c0, *params, *outputs[3:])
        ctx.mark_non_differentiable(*outputs[3:])
        return outputs

    @staticmethod
    def backward(ctx, grad_y, grad_hy, grad_cy, *unused):
        saved = ctx.saved_tensors
        input, h0, c0, params, gates = saved[0], saved[1], saved[2], saved[3:-7], saved[-7:]
        grads = [g if g is not None else input.new_zeros(shape) for g, shape in zip((grad_y, grad_hy, grad_cy), ctx.shapes)]  # fmt: skip
        d_input, d_hx, d_params = torch.ops.npu._lstm_npu_backward(*grads, input, [h0, c0], list(params), *gates, **ctx.options)  # fmt: skip
        return None, d_input, d_hx[0], d_hx[1], *d_params


def _lstm_npu_autograd(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, *,
                       batch_first=False, batch_sizes=None):  # fmt: skip
    options = dict(has_biases=has_biases, num_layers=num_layers, dropout=dropout, train=train,
                   bidirectional=bidirectional, batch_first=batch_first, batch_sizes=batch_sizes)  # fmt: skip
    return LstmNpu.apply(options, input, hx[0], hx[1], *params)


_library("npu").impl("_lstm_npu", _lstm_npu_autograd, "Autograd")
