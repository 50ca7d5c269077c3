"""torch_npu.contrib.module._ensemble_dropout.NpuPreGenDropout: masks drawn ahead, consumed in turn."""

import pytest
import torch
from error_cases import raises_exactly

import torch_npu
from torch_npu.contrib.function._matmul_transpose import MatmulApply
from torch_npu.contrib.module._ensemble_dropout import NpuPreGenDropout, _PreGenDropoutTask


@pytest.fixture
def registered():
    NpuPreGenDropout.task_dict.clear()
    NpuPreGenDropout.prob.clear()
    yield
    NpuPreGenDropout.task_dict.clear()
    NpuPreGenDropout.prob.clear()


def test_calls_consume_consecutive_slices_of_the_pre_drawn_mask(registered):
    model = torch.nn.Linear(4, 4).npu()
    dropout = NpuPreGenDropout(p=0.25)
    NpuPreGenDropout.enable_dropout_ensemble(model)
    task = NpuPreGenDropout.task_dict[0.25]
    assert isinstance(task, _PreGenDropoutTask) and task.mask.numel() == 16 * 1024 * 1024 // 8
    assert NpuPreGenDropout.dropout_stream is not None
    x = torch.randn(3, 100, device="npu")  # 300 elements: 3 blocks of 128 -> 48 mask bytes
    assert torch.equal(dropout([x.shape, x.dtype, x.device]), task.mask[:48])
    first, second = dropout(x), dropout(x)
    assert task.idx == 96
    assert torch.equal(first, torch_npu.npu_dropout_do_mask(x, task.mask[:48], 0.25)[0])
    assert torch.equal(second, torch_npu.npu_dropout_do_mask(x, task.mask[48:96], 0.25)[0])
    kept = (first != 0).float().mean().item()
    assert 0.6 < kept < 0.9
    old = task.mask
    model(torch.ones(4, device="npu"))  # the forward hook draws the next mask
    assert task.idx == 0 and not torch.equal(task.mask, old)


def test_probability_zero_unregistered_probability_and_bad_input(registered):
    x = torch.randn(2, 3, device="npu")
    assert NpuPreGenDropout(p=0)(x) is x
    raises_exactly(
        lambda: NpuPreGenDropout(p=0.3)(x),
        RuntimeError,
        "NpuPreGenDropout input prob error! You Only Register prob:dict_keys([])",
    )
    raises_exactly(lambda: NpuPreGenDropout(p=0.5)("invalid_input"), RuntimeError, "input type error!")


def test_matmul_apply_is_matmul_with_the_transposed_second_operand():
    a = torch.randn(2, 3, 4, 5, requires_grad=True)
    b = torch.randn(2, 3, 4, 5, requires_grad=True)
    an, bn = (t.detach().npu().requires_grad_() for t in (a, b))
    out = MatmulApply.apply(an, bn)
    want = torch.matmul(a, b.transpose(-2, -1))
    assert torch.equal(out.cpu(), want)
    out.sum().backward()
    want.sum().backward()
    assert torch.equal(an.grad.cpu(), a.grad) and torch.equal(bn.grad.cpu(), b.grad)


def test_the_layer_is_importable_from_contrib_module():
    from torch_npu.contrib.module import NpuPreGenDropout as exported

    assert exported is NpuPreGenDropout
