"""The named recurrent and multi-head-attention backward operators against autograd of torch's own LSTM / GRU /
LSTMCell on the CPU and of the attention composition written out in the forward's tests; each called with the
saved outputs of its forward as torch_npu's autograd calls it."""

import pytest
import torch
from test_ops_multi_head_attention import BATCH, DIM, HEADS, SRC, TGT, _inputs
from test_ops_multi_head_attention import reference as attention_reference
from torch import _VF

import torch_npu

T, B, INPUT, H = 5, 3, 6, 4


def _random(seed, *shapes):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g) for shape in shapes]


def _close(got, want, tol=1e-5):
    for i, (a, b) in enumerate(zip(got, want)):
        torch.testing.assert_close(a.cpu(), b, atol=tol, rtol=tol, msg=lambda m, i=i: f"gradient {i}: {m}")


def _last_step_only(final):
    """A per-step [T, B, H] gradient that reaches only the final state (what torch's layer returns)."""
    per_step = torch.zeros(T, B, H)
    per_step[-1] = final
    return per_step


def test_lstm_backward_matches_torchs_lstm():
    x, h, c, w_ih, w_hh, bias = _random(0, (T, B, INPUT), (1, B, H), (1, B, H), (INPUT, 4 * H), (H, 4 * H), (4 * H,))
    weight = torch.cat([w_ih, w_hh])
    outputs = torch_npu.npu_lstm(x.npu(), weight.npu(), bias.npu(), torch.zeros(0).npu(), h.npu(), c.npu(),
                                 True, 1, 0.0, True, False, False, False, False)  # fmt: skip
    dy, dh, dc = _random(1, (T, B, H), (B, H), (B, H))
    got = torch_npu.npu_lstm_backward(
        dy.npu(), _last_step_only(dh).npu(), _last_step_only(dc).npu(),
        x.npu(), weight.npu(), bias.npu(), h.npu(), c.npu(), *outputs,
    )  # fmt: skip
    leaves = [t.clone().requires_grad_() for t in (x, w_ih.t().contiguous(), w_hh.t().contiguous(), bias, h, c)]
    y, h_n, c_n = _VF.lstm(leaves[0], (leaves[4], leaves[5]), (leaves[1], leaves[2], leaves[3], torch.zeros(4 * H)),
                           True, 1, 0.0, True, False, False)  # fmt: skip
    grads = torch.autograd.grad([y, h_n, c_n], leaves, [dy, dh[None], dc[None]])
    dweight = torch.cat([grads[1].t(), grads[2].t()])
    _close(got, [grads[0], dweight, grads[3], grads[4], grads[5]])


@pytest.mark.parametrize("has_biases", [True, False])
def test_lstm_backward_finds_the_reverse_direction_from_the_saved_output(has_biases):
    x, h, c, weight, bias = _random(2, (T, B, INPUT), (1, B, H), (1, B, H), (INPUT + H, 4 * H), (4 * H,))
    leaves = [t.npu().requires_grad_() for t in (x, weight, bias, h, c)]
    outputs = torch_npu.npu_lstm(leaves[0], leaves[1], leaves[2], torch.zeros(0).npu(), leaves[3], leaves[4],
                                 has_biases, 1, 0.0, True, False, False, False, True)  # fmt: skip
    dy, dh, dc = _random(3, (T, B, H), (T, B, H), (T, B, H))
    want = torch.autograd.grad(outputs[:3], leaves, [dy.npu(), dh.npu(), dc.npu()], allow_unused=True)
    saved = [o.detach() for o in outputs]
    got = torch_npu.npu_lstm_backward(dy.npu(), dh.npu(), dc.npu(), x.npu(), weight.npu(), bias.npu(), h.npu(),
                                      c.npu(), *saved)  # fmt: skip
    want = [torch.zeros_like(leaves[2]).cpu() if w is None else w.cpu() for w in want]
    _close(got, want, tol=0)


def test_lstm_data_backward_matches_the_forward_autograd():
    x, h, c, weight, bias = _random(4, (T, B, INPUT), (1, B, H), (1, B, H), (INPUT + H, 4 * H), (4 * H,))
    batch_sizes = torch.tensor([3, 3, 2, 1, 1])
    leaves = [t.npu().requires_grad_() for t in (x, weight, bias, h, c)]
    outputs = torch_npu.npu_lstm_data(leaves[0], batch_sizes.npu(), leaves[1], leaves[2], torch.zeros(0).npu(),
                                      leaves[3], leaves[4], True, 1, 0.0, True, False, False, False, True)  # fmt: skip
    dy, dh = _random(5, (T, B, H), (T, B, H))
    want = torch.autograd.grad(outputs[:2], leaves, [dy.npu(), dh.npu()])
    got = torch_npu.npu_lstm_data_backward(dy.npu(), dh.npu(), None, x.npu(), batch_sizes.npu(), weight.npu(),
                                           bias.npu(), h.npu(), c.npu(), *[o.detach() for o in outputs], True)  # fmt: skip
    _close(got, [w.cpu() for w in want], tol=0)


def test_lstm_cell_backward_matches_torchs_lstm_cell():
    x, h, c, w_ih, w_hh, b_ih, b_hh = _random(6, (B, INPUT), (B, H), (B, H), (INPUT, 4 * H), (H, 4 * H), (4 * H,), (4 * H,))  # fmt: skip
    outputs = torch_npu.npu_lstm_cell(x.npu(), w_ih.npu(), w_hh.npu(), h.npu(), c.npu(), b_ih.npu(), b_hh.npu())
    dh, dc = _random(7, (B, H), (B, H))
    got = torch_npu.npu_lstm_cell_backward(None, dh.npu(), dc.npu(), x.npu(), w_ih.npu(), w_hh.npu(), h.npu(),
                                           c.npu(), *outputs)  # fmt: skip
    leaves = [t.clone().requires_grad_() for t in (x, w_ih, w_hh, b_ih, b_hh, h, c)]
    h1, c1 = _VF.lstm_cell(leaves[0], (leaves[5], leaves[6]), leaves[1].t(), leaves[2].t(), leaves[3], leaves[4])
    _close(got, torch.autograd.grad([h1, c1], leaves, [dh, dc]))


def test_gru_backward_matches_torchs_gru():
    x, h, w_i, w_h, b_i, b_h = _random(8, (T, B, INPUT), (1, B, H), (INPUT, 3 * H), (H, 3 * H), (3 * H,), (3 * H,))
    seq = torch.tensor([T], dtype=torch.int32).npu()
    outputs = torch_npu.npu_gru(x.npu(), h.npu(), w_i.npu(), w_h.npu(), b_i.npu(), b_h.npu(), seq, True, 1, 0.0,
                                True, False, False)  # fmt: skip
    dy, dh = _random(9, (T, B, H), (B, H))
    got = torch_npu.npu_gru_backward(dy.npu(), _last_step_only(dh).npu(), x.npu(), w_i.npu(), w_h.npu(), b_i.npu(),
                                     b_h.npu(), seq, h.npu(), *outputs)  # fmt: skip
    leaves = [t.clone().requires_grad_() for t in (w_i.t().contiguous(), w_h.t().contiguous(), x, b_i, b_h, h)]
    y, h_n = _VF.gru(leaves[2], leaves[5], (leaves[0], leaves[1], leaves[3], leaves[4]), True, 1, 0.0, True, False,
                     False)  # fmt: skip
    grads = torch.autograd.grad([y, h_n], leaves, [dy, dh[None]])
    _close(got, [grads[0].t(), grads[1].t(), *grads[2:]])


@pytest.mark.parametrize("p", [0.0, 0.3])
def test_multi_head_attention_backward_from_the_saved_tensors(p):
    args = _inputs(10)
    dropout_mask = torch_npu.npu_dropout_gen_mask((BATCH, HEADS, TGT, SRC), p, device="npu") if p else None
    outputs = torch_npu.npu_multi_head_attention(*[a.npu() for a in args], dropout_mask, HEADS, DIM, SRC, TGT, p, True)
    y_grad = _random(11, tuple(outputs[0].shape))[0]
    query, key, value, wq, wk, wv, _, wo, bq, bk, bv, bo = (a.npu() for a in args)
    y, mask, q, k, v, softmax, probs, context = outputs
    got = torch_npu.npu_multi_head_attention_backward(
        query, key, value, wq, wk, wv, wo, bq, bk, bv, bo, q, k, v, softmax, probs, context, y_grad.npu(), mask,
        HEADS, DIM, SRC, TGT, p, True,
    )  # fmt: skip
    keep = None
    if p:
        bits = (mask.cpu().view(-1, 1) >> torch.arange(8, dtype=torch.uint8)) & 1
        keep = bits.reshape(-1)[: BATCH * HEADS * TGT * SRC].view(BATCH, HEADS, TGT, SRC).float()
    leaves = [a.clone().requires_grad_(i != 6) for i, a in enumerate(args)]
    want_y = attention_reference(*leaves, keep=keep, p=p)[0]
    order = [3, 4, 5, 7, 0, 1, 2, 8, 9, 10, 11]
    want = torch.autograd.grad(want_y, [leaves[i] for i in order], y_grad)
    _close(got, want)


def test_the_backward_operators_trace_with_their_fake_kernels():
    """Each operator under torch.compile(fullgraph) traces through its fake kernel and gives the eager result."""
    x, h, c, weight, bias = _random(12, (T, B, INPUT), (1, B, H), (1, B, H), (INPUT + H, 4 * H), (4 * H,))
    args = [t.npu() for t in (x, weight, bias, h, c)]
    saved = torch_npu.npu_lstm(args[0], args[1], args[2], torch.zeros(0).npu(), args[3], args[4],
                               True, 1, 0.0, True, False, False, False, False)  # fmt: skip
    dy = torch.randn(T, B, H).npu()

    def lstm_backward(dy, *tensors):
        return torch_npu.npu_lstm_backward(dy, None, None, *tensors)

    w_ih, w_hh = torch.randn(INPUT, 4 * H).npu(), torch.randn(H, 4 * H).npu()
    cell = torch_npu.npu_lstm_cell(args[0][0], w_ih, w_hh, args[3][0], args[4][0])

    def cell_backward(dh, *tensors):
        return torch_npu.npu_lstm_cell_backward(None, dh, None, *tensors)

    cases = [
        (lstm_backward, (dy, *args, *saved)),
        (cell_backward, (dy[0], args[0][0], w_ih, w_hh, args[3][0], args[4][0], *cell)),
    ]
    for fn, inputs in cases:
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)(*inputs)
        _close(compiled, [t.cpu() for t in fn(*inputs)], tol=0)
