"""Recurrent layers on npu compute what the CPU computes, bit for bit: ATen's RNN composites branch on
the device (all-steps input projection or oneDNN on the CPU, a fused cell per step elsewhere), and
npu takes the CPU's branch (torch_npu/csrc/aten/HostRecurrent.cpp), backward included."""

import pytest
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pack_sequence, pad_packed_sequence


def _pair(cls, *args, **kwargs):
    torch.manual_seed(0)
    cpu = cls(*args, **kwargs)
    npu = cls(*args, **kwargs).npu()
    npu.load_state_dict(cpu.state_dict())
    return cpu, npu


def _assert_grads_equal(cpu, npu):
    for (name, p), q in zip(npu.named_parameters(), cpu.parameters()):
        assert torch.equal(p.grad.cpu(), q.grad), name


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
@pytest.mark.parametrize("bias", [True, False])
def test_recurrent_layers_equal_cpu_bitwise_forward_and_backward(cls, bias):
    cpu, npu = _pair(cls, 5, 7, num_layers=2, bidirectional=True, bias=bias, batch_first=True)
    x = torch.randn(3, 6, 5, requires_grad=True)
    xn = x.detach().npu().requires_grad_()
    out, hidden = cpu(x)
    out_n, hidden_n = npu(xn)
    assert out_n.device.type == "npu" and torch.equal(out_n.detach().cpu(), out.detach())
    weights = torch.linspace(-1, 1, out.shape[-1])
    (out * weights).sum().backward()
    (out_n * weights.npu()).sum().backward()
    assert torch.equal(xn.grad.cpu(), x.grad)
    _assert_grads_equal(cpu, npu)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
@pytest.mark.parametrize("other_op_first", [True, False])
def test_inputs_shared_with_other_operators_get_the_cpus_gradient_bits(cls, other_op_first):
    # A bidirectional layer uses its input (and a tied weight is used) once per direction; each use's gradient
    # must reach the shared tensor separately, in the CPU's order, between the other operators' gradients.
    def run(device):
        torch.manual_seed(0)
        layer = cls(5, 7, num_layers=2, bidirectional=True).to(device)
        x = torch.randn(6, 3, 5).to(device).requires_grad_()
        h0 = torch.randn(4, 3, 7).to(device).requires_grad_()
        shared = x * 1.5
        other = (shared.sin() * 3).sum() if other_op_first else None
        out, _ = layer(shared, (h0, h0.cos()) if cls is nn.LSTM else h0)
        loss = out.square().sum() + (h0 * h0).sum() + layer.weight_ih_l0.square().sum()
        loss = loss + (other if other_op_first else (shared.sin() * 3).sum())
        loss.backward()
        return [x.grad, h0.grad] + [p.grad for p in layer.parameters()]

    for a, b in zip(run("cpu"), run("npu")):
        assert torch.equal(b.cpu(), a)


def test_lstm_with_projection_and_initial_state_and_both_outputs_in_the_loss():
    cpu, npu = _pair(nn.LSTM, 4, 6, proj_size=3)
    x, h0, c0 = torch.randn(5, 2, 4), torch.randn(1, 2, 3, requires_grad=True), torch.randn(1, 2, 6)
    h0n = h0.detach().npu().requires_grad_()
    out, (h, c) = cpu(x, (h0, c0))
    out_n, (h_n, c_n) = npu(x.npu(), (h0n, c0.npu()))
    for a, b in ((out_n, out), (h_n, h), (c_n, c)):
        assert torch.equal(a.detach().cpu(), b.detach())
    (out.sum() + c.pow(2).sum()).backward()
    (out_n.sum() + c_n.pow(2).sum()).backward()
    assert torch.equal(h0n.grad.cpu(), h0.grad)
    _assert_grads_equal(cpu, npu)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
def test_packed_sequences_equal_cpu_and_keep_batch_sizes_on_the_cpu(cls):
    cpu, npu = _pair(cls, 3, 4)
    x = torch.randn(3, 5, 3)  # batch-first, lengths 5, 3, 2
    lengths = torch.tensor([5, 3, 2])
    packed = pack_padded_sequence(x, lengths, batch_first=True)
    packed_n = pack_padded_sequence(x.npu(), lengths, batch_first=True)
    assert packed_n.data.device.type == "npu" and packed_n.batch_sizes.device.type == "cpu"
    out, _ = pad_packed_sequence(cpu(packed)[0], batch_first=True)
    out_n, lengths_n = pad_packed_sequence(npu(packed_n)[0], batch_first=True)
    assert torch.equal(out_n.cpu(), out) and torch.equal(lengths_n, lengths)
    out.sum().backward()
    out_n.sum().backward()
    _assert_grads_equal(cpu, npu)


def test_pack_sequence_and_the_device_rule_for_lengths():
    seqs = [torch.randn(4, 2), torch.randn(2, 2)]
    packed = pack_sequence(seqs)
    packed_n = pack_sequence([s.npu() for s in seqs])
    assert torch.equal(packed_n.data.cpu(), packed.data) and torch.equal(packed_n.batch_sizes, packed.batch_sizes)
    with pytest.raises(
        RuntimeError, match=r"'lengths' argument should be a 1D CPU int64 tensor, but got 1D npu:0 Long"
    ):
        pack_padded_sequence(torch.randn(2, 4, 2, device="npu"), torch.tensor([4, 2], device="npu"), batch_first=True)


def test_cells_equal_cpu_bitwise():
    x, h, c = torch.randn(2, 4), torch.randn(2, 3), torch.randn(2, 3)
    for cls, state in ((nn.LSTMCell, (h, c)), (nn.GRUCell, h), (nn.RNNCell, h)):
        cpu, npu = _pair(cls, 4, 3)
        state_n = tuple(s.npu() for s in state) if isinstance(state, tuple) else state.npu()
        out, out_n = cpu(x, state), npu(x.npu(), state_n)
        out, out_n = (out, out_n) if isinstance(out, tuple) else ((out,), (out_n,))
        for a, b in zip(out_n, out):
            assert torch.equal(a.detach().cpu(), b.detach()), cls.__name__
        out[0].sum().backward()
        out_n[0].sum().backward()
        _assert_grads_equal(cpu, npu)


def test_inference_mode_and_no_grad_equal_cpu():
    cpu, npu = _pair(nn.GRU, 3, 4, num_layers=2)
    x = torch.randn(6, 2, 3)
    with torch.inference_mode():
        assert torch.equal(npu(x.npu())[0].cpu(), cpu(x)[0])
    with torch.no_grad():
        out_n = npu(x.npu())[0]
        assert not out_n.requires_grad and torch.equal(out_n.cpu(), cpu(x)[0])


def test_backward_twice_with_retain_graph_accumulates_the_same_gradients():
    cpu, npu = _pair(nn.LSTM, 3, 4)
    out_n = npu(torch.randn(4, 2, 3).npu())[0].sum()
    out_n.backward(retain_graph=True)
    first = [p.grad.clone() for p in npu.parameters()]
    out_n.backward()
    for p, g in zip(npu.parameters(), first):
        assert torch.equal(p.grad.cpu(), 2 * g.cpu())


def test_training_with_dropout_between_layers_draws_from_the_npu_generator():
    _, npu = _pair(nn.LSTM, 3, 4, num_layers=2, dropout=0.5)
    x = torch.randn(5, 2, 3).npu()
    torch.npu.manual_seed(1)
    a = npu(x)[0]
    torch.npu.manual_seed(1)
    b = npu(x)[0]
    torch.npu.manual_seed(2)
    c = npu(x)[0]
    assert torch.equal(a.cpu(), b.cpu()) and not torch.equal(a.cpu(), c.cpu())
    a.sum().backward()
    assert all(p.grad is not None and p.grad.device.type == "npu" for p in npu.parameters())


def test_second_backward_without_retain_graph_raises_pytorchs_error():
    _, npu = _pair(nn.LSTM, 3, 4)
    loss = npu(torch.randn(4, 2, 3).npu())[0].sum()
    loss.backward()
    with pytest.raises(
        RuntimeError,
        match=r"^Trying to backward through the graph a second time \(or directly access "
        r"saved tensors after they have already been freed\)\.",
    ):
        loss.backward()
