"""_lstm_npu / _gru_npu and their backwards: op-plugin's whole recurrent networks (every layer and direction in
one call, aclnnLSTM / aclnnGRU), which torch_npu's aten::lstm and aten::gru run on the card.

Both take torch's weights as nn.LSTM / nn.GRU list them (per layer and direction: weight_ih, weight_hh, and with
has_biases bias_ih, bias_hh) and return y [T, B, directions * hidden] (batch_first: [B, T, ...]), the final
states [layers * directions, B, hidden], then per layer and direction what the card's backward reads, each
stacked [layers * directions, T, B, hidden]:
  _lstm_npu(input, hx=[h0, c0], ...) -> (y, h_n, c_n, i, j (the cell candidate g), f, o, h, c, tanh(c)); in eval
  (train=False) i, j, f, o and tanh(c) are empty, as the card keeps only the states.
  _gru_npu(input, hx, ...) -> (y, h_n, r, z, n, W_hn h + b_hn, h); in eval all five are empty.
Each layer computes as npu_lstm / npu_gru (torch's cells, in the input's dtype); a reverse direction runs the
sequence backwards with its outputs in time order. Refused with an error naming them: dropout between layers
while training (the card's backward is given no mask) and packed sequences (batch_sizes); vnpu's nn.LSTM and
nn.GRU run through ATen, which handles both.

The backwards return (d input, d hx ([d h0, d c0] for the LSTM), d params): the vector-Jacobian product of the
same composition as one operator (the gates they are given are what the card's kernel reads; vnpu recomputes
them). Autograd of _lstm_npu / _gru_npu goes through them (grad_fn LstmNpuBackward / GruNpuBackward)."""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import _library, npu_op
from torch_npu.ops.rnn_layers import _lstm_layer, npu_gru
from torch_npu.ops.vjp import vjp

__all__ = []

_LSTM_STEPS = ("h", "c", "i", "j", "f", "o", "tanhc")
_GRU_STEPS = ("h", "z", "r", "n", "hn")


def _lstm_direction(x, h0, c0, group, has_biases, reverse, op):
    """(y [T, B, H], (h_T, c_T), {name: [T, B, H]}) of one LSTM layer and direction."""
    w_ih, w_hh, *biases = group
    bias = biases[0] + biases[1] if has_biases else w_ih.new_empty(0)
    weight = torch.cat([w_ih.t(), w_hh.t()])
    y, *steps = _lstm_layer(x, weight, bias, h0, c0, has_biases, False, reverse, None, op)
    records = dict(zip(_LSTM_STEPS, steps, strict=True))
    last = 0 if reverse else -1  # the reverse direction ends at the first step
    return y, (records["h"][last], records["c"][last]), records


def _gru_direction(x, h0, group, has_biases, reverse, op):
    """(y [T, B, H], (h_T,), {name: [T, B, H]}) of one GRU layer and direction."""
    w_ih, w_hh, *biases = group
    empty = w_ih.new_empty(0)
    b_ih, b_hh = biases if has_biases else (empty, empty)
    steps_in = x.flip(0) if reverse else x
    y, *steps = npu_gru(steps_in, h0, w_ih.t(), w_hh.t(), b_ih, b_hh, empty, has_biases, 1, 0.0, True, False, False)
    records = dict(zip(_GRU_STEPS, steps, strict=True))
    if reverse:
        y, records = y.flip(0), {name: value.flip(0) for name, value in records.items()}
    return y, (records["h"][0 if reverse else -1],), records


def _stack(op, run, x, states, params, has_biases, num_layers, dropout, train, bidirectional, batch_first,
           batch_sizes):  # fmt: skip
    """(y, final states stacked [layers * directions, B, H] each, {name: [per layer and direction]})."""
    check(batch_sizes is None or batch_sizes.numel() == 0, op, "packed sequences (batch_sizes) are not modelled by vnpu; nn.LSTM and nn.GRU run them through ATen")  # fmt: skip
    check(not (train and dropout > 0 and num_layers > 1), op, f"dropout={dropout} between layers while training is not modelled by vnpu (the card's backward is given no mask)")  # fmt: skip
    check(x.dim() == 3, op, f"input must be 3-D [T, B, input] (or [B, T, input] with batch_first), got {x.dim()}-D")
    directions = 2 if bidirectional else 1
    per = 4 if has_biases else 2  # weight_ih, weight_hh (, bias_ih, bias_hh)
    check(len(params) == per * num_layers * directions, op, f"params must hold {per} tensors per layer and direction ({per * num_layers * directions}), got {len(params)} (projections are not supported)")  # fmt: skip
    layer_input = x.transpose(0, 1) if batch_first else x
    finals, records = [[] for _ in states], {}
    for layer in range(num_layers):
        outputs = []
        for direction in range(directions):
            k = layer * directions + direction
            group = params[per * k : per * (k + 1)]
            y, last, steps = run(layer_input, *(s[k] for s in states), group, has_biases, bool(direction), op)
            for kept, value in zip(finals, last, strict=True):
                kept.append(value)
            for name, value in steps.items():
                records.setdefault(name, []).append(value)
            outputs.append(y)
        layer_input = torch.cat(outputs, dim=-1)
    y = layer_input.transpose(0, 1) if batch_first else layer_input
    return y, [torch.stack(kept) for kept in finals], records


_OPTIONS = (
    "bool has_biases, int num_layers, float dropout, bool train, bool bidirectional, *, bool? batch_first=False, "
    "Tensor? batch_sizes=None"
)


def _options(has_biases, num_layers, dropout, train, bidirectional, batch_first, batch_sizes):
    return dict(has_biases=has_biases, num_layers=num_layers, dropout=dropout, train=train,
                bidirectional=bidirectional, batch_first=bool(batch_first), batch_sizes=batch_sizes)  # fmt: skip


@npu_op(f"_lstm_npu(Tensor input, Tensor[] hx, Tensor[] params, {_OPTIONS}) -> ({', '.join(['Tensor'] * 10)})")
def _lstm_npu(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, *, batch_first=False,
              batch_sizes=None):  # fmt: skip
    """(y, h_n, c_n, i, j, f, o, h, c, tanhc): see the module doc."""
    check(len(hx) == 2, "_lstm_npu", f"hx must be [h0, c0], got {len(hx)} tensors")
    options = _options(has_biases, num_layers, dropout, train, bidirectional, batch_first, batch_sizes)
    y, (h_n, c_n), records = _stack("_lstm_npu", _lstm_direction, input, hx, params, **options)
    kept = {name: torch.stack(values) if train or name in ("h", "c") else input.new_empty(0) for name, values in records.items()}  # fmt: skip
    return y, h_n, c_n, *(kept[name] for name in ("i", "j", "f", "o", "h", "c", "tanhc"))


@npu_op(f"_gru_npu(Tensor input, Tensor hx, Tensor[] params, {_OPTIONS}) -> ({', '.join(['Tensor'] * 7)})")
def _gru_npu(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, *, batch_first=False,
             batch_sizes=None):  # fmt: skip
    """(y, h_n, r, z, n, hn, h): see the module doc."""
    options = _options(has_biases, num_layers, dropout, train, bidirectional, batch_first, batch_sizes)
    y, (h_n,), records = _stack("_gru_npu", _gru_direction, input, [hx], params, **options)
    kept = {name: torch.stack(values) if train else input.new_empty(0) for name, values in records.items()}
    return y, h_n, *(kept[name] for name in ("r", "z", "n", "hn", "h"))


def _vjp_of_stack(op, run, grads, input, states, params, options):
    """(d input, [d state...], [d param...]) of the stack's (y, final states...)."""
    count = len(states)

    def forward(x, *rest):
        y, finals, _ = _stack(op, run, x, list(rest[:count]), list(rest[count:]), **options)
        return (y, *finals)

    inputs = [input, *states, *params]
    found = vjp(forward, inputs, range(len(inputs)), grads)
    return found[0], list(found[1 : 1 + count]), list(found[1 + count :])


@npu_op(
    f"_lstm_npu_backward(Tensor grad_y, Tensor grad_hy, Tensor grad_cy, Tensor input, Tensor[] hx, Tensor[] params, "
    f"Tensor i, Tensor j, Tensor f, Tensor o, Tensor h, Tensor c, Tensor tanhc, {_OPTIONS}) -> (Tensor, Tensor[], Tensor[])",  # fmt: skip
    fake=lambda grad_y, grad_hy, grad_cy, input, hx, params, *args, **kwargs: (
        torch.empty_like(input),
        [torch.empty_like(t) for t in hx],
        [torch.empty_like(t) for t in params],
    ),  # fmt: skip
)
def _lstm_npu_backward(grad_y, grad_hy, grad_cy, input, hx, params, i, j, f, o, h, c, tanhc, has_biases, num_layers,
                       dropout, train, bidirectional, *, batch_first=False, batch_sizes=None):  # fmt: skip
    """(d input, [d h0, d c0], d params) of _lstm_npu's (y, h_n, c_n)."""
    options = _options(has_biases, num_layers, dropout, train, bidirectional, batch_first, batch_sizes)
    return _vjp_of_stack("_lstm_npu", _lstm_direction, [grad_y, grad_hy, grad_cy], input, list(hx), params, options)


@npu_op(
    f"_gru_npu_backward(Tensor grad_y, Tensor grad_h, Tensor input, Tensor hx, Tensor[] params, Tensor r, Tensor z, "
    f"Tensor n, Tensor h_n, Tensor h, {_OPTIONS}) -> (Tensor, Tensor, Tensor[])",
    fake=lambda grad_y, grad_h, input, hx, params, *args, **kwargs: (
        torch.empty_like(input),
        torch.empty_like(hx),
        [torch.empty_like(t) for t in params],
    ),  # fmt: skip
)
def _gru_npu_backward(grad_y, grad_h, input, hx, params, r, z, n, h_n, h, has_biases, num_layers, dropout, train,
                      bidirectional, *, batch_first=False, batch_sizes=None):  # fmt: skip
    """(d input, d hx, d params) of _gru_npu's (y, h_n)."""
    options = _options(has_biases, num_layers, dropout, train, bidirectional, batch_first, batch_sizes)
    d_input, (d_hx,), d_params = _vjp_of_stack("_gru_npu", _gru_direction, [grad_y, grad_h], input, [hx], params, options)  # fmt: skip
    return d_input, d_hx, d_params


def _autograd(name, forward_op, backward_op, state_count, differentiable_outputs):
    """The Autograd kernel of a whole-network operator: the states and params travel as separate tensors (autograd
    tracks no list), and the backward is the one backward operator."""

    def forward(ctx, options, input, *tensors):
        states, params = list(tensors[:state_count]), list(tensors[state_count:])
        with torch._C._AutoDispatchBelowAutograd():
            outputs = forward_op(input, states if state_count > 1 else states[0], params, **options)
        ctx.options, ctx.shapes = options, [o.shape for o in outputs[:differentiable_outputs]]
        ctx.save_for_backward(input, *tensors, *outputs[differentiable_outputs:])
        ctx.mark_non_differentiable(*outputs[differentiable_outputs:])
        return outputs

    def backward(ctx, *grads):
        saved = ctx.saved_tensors  # input, the states, the params, then the outputs the card's backward reads
        params_end = len(saved) - (len(grads) - differentiable_outputs)
        input, states = saved[0], saved[1 : 1 + state_count]
        params, kept = saved[1 + state_count : params_end], saved[params_end:]
        given = [g if g is not None else input.new_zeros(shape) for g, shape in zip(grads, ctx.shapes)]
        hx = list(states) if state_count > 1 else states[0]
        d_input, d_hx, d_params = backward_op(*given, input, hx, list(params), *kept, **ctx.options)
        d_states = d_hx if state_count > 1 else [d_hx]
        return None, d_input, *d_states, *d_params

    function = type(name, (torch.autograd.Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})  # fmt: skip

    def kernel(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, *, batch_first=False,
               batch_sizes=None):  # fmt: skip
        options = _options(has_biases, num_layers, dropout, train, bidirectional, batch_first, batch_sizes)
        if state_count > 1:  # (checked before the list is spread into separate tensors)
            check(len(hx) == state_count, forward_op.__name__, f"hx must be [h0, c0], got {len(hx)} tensors")  # fmt: skip
        states = list(hx) if state_count > 1 else [hx]
        return function.apply(options, input, *states, *params)

    return kernel


# Named as torch_npu names the nodes: LstmNpuBackward, GruNpuBackward.
_library("npu").impl("_lstm_npu", _autograd("LstmNpu", torch.ops.npu._lstm_npu, torch.ops.npu._lstm_npu_backward, 2, 3), "Autograd")  # fmt: skip
_library("npu").impl("_gru_npu", _autograd("GruNpu", torch.ops.npu._gru_npu, torch.ops.npu._gru_npu_backward, 1, 2), "Autograd")  # fmt: skip
