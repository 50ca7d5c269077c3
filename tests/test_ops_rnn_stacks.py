"""_lstm_npu / _gru_npu and their backwards (op-plugin's whole LSTM and GRU, which torch_npu's aten::lstm and
aten::gru run) against torch's nn.LSTM / nn.GRU on the CPU: outputs, final states, per-step gates, gradients
through the one backward operator, and the arguments vnpu refuses."""

import pytest
import torch
from error_cases import raises_operator_error
from torch.utils._python_dispatch import TorchDispatchMode

import torch_npu

INPUT, HIDDEN, BATCH, STEPS = 5, 4, 3, 6


def _case(layers, bidirectional, batch_first, bias):
    torch.manual_seed(layers * 4 + bidirectional * 2 + batch_first)
    lstm = torch.nn.LSTM(INPUT, HIDDEN, num_layers=layers, bias=bias, bidirectional=bidirectional, batch_first=batch_first)  # fmt: skip
    x = torch.randn(BATCH, STEPS, INPUT) if batch_first else torch.randn(STEPS, BATCH, INPUT)
    states = layers * (2 if bidirectional else 1)
    return lstm, x, torch.randn(states, BATCH, HIDDEN), torch.randn(states, BATCH, HIDDEN)


def _backward_is_one_operator(want, got, operator):
    """Backpropagates the same random cotangents through torch's outputs `want` and the npu ones `got`; the npu
    backward must reach the dispatcher as the one operator."""
    grads = [torch.randn(t.shape) for t in want]
    sum((t * g).sum() for t, g in zip(want, grads, strict=True)).backward()
    with _Ops() as ops:
        sum((t * g.npu()).sum() for t, g in zip(got, grads, strict=True)).backward()
    assert f"npu.{operator}" in ops.names and "aten.sigmoid" not in ops.names


class _Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize(
    ("layers", "bidirectional", "batch_first", "bias"),
    [(1, False, False, True), (2, True, True, True), (2, False, False, False), (1, True, False, True)],
)
def test_lstm_npu_equals_nn_lstm_forward_and_backward(layers, bidirectional, batch_first, bias):
    lstm, x, h0, c0 = _case(layers, bidirectional, batch_first, bias)
    x.requires_grad_(True), h0.requires_grad_(True)
    y, (h_n, c_n) = lstm(x, (h0, c0))
    params = [p.detach().npu().requires_grad_(True) for p in lstm._flat_weights]
    xn, hn0 = x.detach().npu().requires_grad_(True), h0.detach().npu().requires_grad_(True)
    out = torch_npu._lstm_npu(xn, [hn0, c0.npu()], params, bias, layers, 0.0, True, bidirectional, batch_first=batch_first)  # fmt: skip
    for got, want in zip(out[:3], (y, h_n, c_n), strict=True):
        torch.testing.assert_close(got.cpu(), want.detach(), atol=1e-6, rtol=1e-5)
    assert all(t.shape == (h0.shape[0], STEPS, BATCH, HIDDEN) for t in out[3:])
    assert type(out[0].grad_fn).__name__ == "LstmNpuBackward"
    _backward_is_one_operator((y, h_n), out[:2], "_lstm_npu_backward")
    torch.testing.assert_close(xn.grad.cpu(), x.grad, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(hn0.grad.cpu(), h0.grad, atol=1e-5, rtol=1e-5)
    for got, want in zip(params, lstm._flat_weights, strict=True):
        torch.testing.assert_close(got.grad.cpu(), want.grad, atol=1e-5, rtol=1e-5)


def test_per_step_states_and_gates_are_npu_lstms_and_eval_keeps_only_the_states():
    lstm, x, h0, c0 = _case(1, False, False, True)
    w_ih, w_hh, b_ih, b_hh = (p.detach().npu() for p in lstm._flat_weights)
    out = torch_npu._lstm_npu(x.npu(), [h0.npu(), c0.npu()], [w_ih, w_hh, b_ih, b_hh], True, 1, 0.0, True, False)
    weight, bias = torch.cat([w_ih.t(), w_hh.t()]), b_ih + b_hh
    layer = torch_npu.npu_lstm(x.npu(), weight, bias, torch.empty(0).npu(), h0.npu(), c0.npu(), True, 1, 0.0, True, False, False, False, False)  # fmt: skip
    # _lstm_npu: (y, h_n, c_n, i, j, f, o, h, c, tanhc); npu_lstm: (y, h, c, i, j, f, o, tanhc)
    for got, want in zip(out[3:7] + out[7:9] + out[9:], layer[3:7] + layer[1:3] + layer[7:], strict=True):
        assert torch.equal(got[0].cpu(), want.cpu())
    evaluated = torch_npu._lstm_npu(x.npu(), [h0.npu(), c0.npu()], [w_ih, w_hh, b_ih, b_hh], True, 1, 0.0, False, False)  # fmt: skip
    assert [t.numel() for t in evaluated[3:7] + evaluated[9:]] == [0] * 5
    assert torch.equal(evaluated[7].cpu(), out[7].cpu()) and torch.equal(evaluated[0].cpu(), out[0].cpu())


def test_lstm_npu_backward_called_directly_gives_input_state_and_weight_gradients():
    lstm, x, h0, c0 = _case(2, True, False, True)
    params = [p.detach().npu() for p in lstm._flat_weights]
    args = (True, 2, 0.0, True, True)
    out = torch_npu._lstm_npu(x.npu(), [h0.npu(), c0.npu()], params, *args)
    grads = [torch.randn(t.shape).npu() for t in out[:3]]
    d_input, d_hx, d_params = torch_npu._lstm_npu_backward(*grads, x.npu(), [h0.npu(), c0.npu()], params, *out[3:], *args)  # fmt: skip
    leaves = [t.clone().requires_grad_(True) for t in (x, h0, c0)]
    y, (h_n, c_n) = lstm(leaves[0], (leaves[1], leaves[2]))
    torch.autograd.backward([y, h_n, c_n], [g.cpu() for g in grads])
    for got, want in zip([d_input, *d_hx, *d_params], [*(leaf.grad for leaf in leaves), *(p.grad for p in lstm._flat_weights)], strict=True):  # fmt: skip
        torch.testing.assert_close(got.cpu(), want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"dropout": 0.5},
            "dropout=0.5 between layers while training is not modelled by vnpu (the card's backward is given no mask)",
        ),  # fmt: skip
        (
            {"batch_sizes": "packed"},
            "packed sequences (batch_sizes) are not modelled by vnpu; nn.LSTM and nn.GRU run them through ATen",
        ),  # fmt: skip
        (
            {"params": "three"},
            "params must hold 4 tensors per layer and direction (8), got 3 (projections are not supported)",
        ),  # fmt: skip
    ],
)
def test_refused_arguments_say_why(change, message):
    lstm, x, h0, c0 = _case(2, False, False, True)
    params = [p.detach().npu() for p in lstm._flat_weights]
    kwargs = {"dropout": change.get("dropout", 0.0)}
    if "batch_sizes" in change:
        kwargs["batch_sizes"] = torch.tensor([6, 6, 6])
    if "params" in change:
        params = params[:3]
    call = lambda: torch_npu._lstm_npu(x.npu(), [h0.npu(), c0.npu()], params, True, 2, kwargs["dropout"], True, False, batch_sizes=kwargs.get("batch_sizes"))  # noqa: E731  # fmt: skip
    raises_operator_error(call, f"_lstm_npu: {message}")


def test_lstm_npu_takes_h0_and_c0():
    lstm, x, h0, _ = _case(1, False, False, True)
    params = [p.detach().npu() for p in lstm._flat_weights]
    call = lambda: torch_npu._lstm_npu(x.npu(), [h0.npu()], params, True, 1, 0.0, True, False)  # noqa: E731
    raises_operator_error(call, "_lstm_npu: hx must be [h0, c0], got 1 tensors")


def _gru_case(layers, bidirectional, batch_first, bias):
    torch.manual_seed(17 + layers * 4 + bidirectional * 2 + batch_first)
    gru = torch.nn.GRU(INPUT, HIDDEN, num_layers=layers, bias=bias, bidirectional=bidirectional, batch_first=batch_first)  # fmt: skip
    x = torch.randn(BATCH, STEPS, INPUT) if batch_first else torch.randn(STEPS, BATCH, INPUT)
    return gru, x, torch.randn(layers * (2 if bidirectional else 1), BATCH, HIDDEN)


@pytest.mark.parametrize(
    ("layers", "bidirectional", "batch_first", "bias"),
    [(1, False, False, True), (2, True, True, True), (2, False, False, False), (1, True, False, True)],
)
def test_gru_npu_equals_nn_gru_forward_and_backward(layers, bidirectional, batch_first, bias):
    gru, x, h0 = _gru_case(layers, bidirectional, batch_first, bias)
    x.requires_grad_(True), h0.requires_grad_(True)
    y, h_n = gru(x, h0)
    params = [p.detach().npu().requires_grad_(True) for p in gru._flat_weights]
    xn, hn0 = x.detach().npu().requires_grad_(True), h0.detach().npu().requires_grad_(True)
    out = torch_npu._gru_npu(xn, hn0, params, bias, layers, 0.0, True, bidirectional, batch_first=batch_first)
    for got, want in zip(out[:2], (y, h_n), strict=True):
        torch.testing.assert_close(got.cpu(), want.detach(), atol=1e-6, rtol=1e-5)
    assert all(t.shape == (h0.shape[0], STEPS, BATCH, HIDDEN) for t in out[2:])
    assert type(out[0].grad_fn).__name__ == "GruNpuBackward"
    _backward_is_one_operator((y, h_n), out[:2], "_gru_npu_backward")
    for got, want in zip([xn, hn0, *params], [x, h0, *gru._flat_weights], strict=True):
        torch.testing.assert_close(got.grad.cpu(), want.grad, atol=1e-5, rtol=1e-5)


def test_gru_npu_keeps_npu_grus_gates_in_training_and_none_in_eval_and_its_backward_runs_directly():
    gru, x, h0 = _gru_case(1, False, False, True)
    w_ih, w_hh, b_ih, b_hh = (p.detach().npu() for p in gru._flat_weights)
    out = torch_npu._gru_npu(x.npu(), h0.npu(), [w_ih, w_hh, b_ih, b_hh], True, 1, 0.0, True, False)
    layer = torch_npu.npu_gru(x.npu(), h0.npu(), w_ih.t(), w_hh.t(), b_ih, b_hh, torch.empty(0).npu(), True, 1, 0.0, True, False, False)  # fmt: skip
    # _gru_npu: (y, h_n, r, z, n, hn, h); npu_gru: (y, h, z, r, n, hn)
    for got, want in zip(out[2:], (layer[3], layer[2], layer[4], layer[5], layer[1]), strict=True):
        assert torch.equal(got[0].cpu(), want.cpu())
    evaluated = torch_npu._gru_npu(x.npu(), h0.npu(), [w_ih, w_hh, b_ih, b_hh], True, 1, 0.0, False, False)
    assert [t.numel() for t in evaluated[2:]] == [0] * 5 and torch.equal(evaluated[0].cpu(), out[0].cpu())
    grads = [torch.randn(t.shape).npu() for t in out[:2]]
    d_input, d_hx, d_params = torch_npu._gru_npu_backward(*grads, x.npu(), h0.npu(), [w_ih, w_hh, b_ih, b_hh], *out[2:], True, 1, 0.0, True, False)  # fmt: skip
    leaves = [t.clone().requires_grad_(True) for t in (x, h0)]
    torch.autograd.backward(list(gru(*leaves)), [g.cpu() for g in grads])
    for got, want in zip([d_input, d_hx, *d_params], [*(leaf.grad for leaf in leaves), *(p.grad for p in gru._flat_weights)], strict=True):  # fmt: skip
        torch.testing.assert_close(got.cpu(), want, atol=1e-5, rtol=1e-5)
