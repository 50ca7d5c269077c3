"""Recurrent layers on npu. ATen runs them through the fused LSTM/GRU cells on any non-CPU device;
vnpu implements those cells (torch_npu/csrc/aten/RnnCells.cpp), so results agree with the CPU to
rounding: the CPU folds the biases into its matmuls in a different order."""
import pytest
import torch
import torch.nn as nn


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
@pytest.mark.parametrize("bias", [True, False])
def test_recurrent_layers_match_cpu_forward_and_backward(cls, bias):
    torch.manual_seed(0)
    cpu = cls(5, 7, num_layers=2, bidirectional=True, bias=bias, batch_first=True)
    npu = cls(5, 7, num_layers=2, bidirectional=True, bias=bias, batch_first=True).npu()
    npu.load_state_dict(cpu.state_dict())
    x = torch.randn(3, 6, 5, requires_grad=True)
    xn = x.detach().npu().requires_grad_()
    out, _ = cpu(x)
    out_n, _ = npu(xn)
    assert torch.allclose(out_n.detach().cpu(), out.detach(), rtol=1e-5, atol=1e-6)
    (out * torch.linspace(-1, 1, out.shape[-1])).sum().backward()
    (out_n * torch.linspace(-1, 1, out.shape[-1]).npu()).sum().backward()
    assert torch.allclose(xn.grad.cpu(), x.grad, rtol=1e-4, atol=1e-6)
    for p, q in zip(npu.parameters(), cpu.parameters()):
        assert torch.allclose(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5)


def test_cells_and_initial_states():
    torch.manual_seed(0)
    cell = nn.LSTMCell(4, 3)
    cell_n = nn.LSTMCell(4, 3).npu()
    cell_n.load_state_dict(cell.state_dict())
    x, h, c = torch.randn(2, 4), torch.randn(2, 3), torch.randn(2, 3)
    hy, cy = cell(x, (h, c))
    hy_n, cy_n = cell_n(x.npu(), (h.npu(), c.npu()))
    assert torch.allclose(hy_n.cpu(), hy, atol=1e-6) and torch.allclose(cy_n.cpu(), cy, atol=1e-6)
    gru = nn.GRUCell(4, 3)
    gru_n = nn.GRUCell(4, 3).npu()
    gru_n.load_state_dict(gru.state_dict())
    assert torch.allclose(gru_n(x.npu(), h.npu()).cpu(), gru(x, h), atol=1e-6)
