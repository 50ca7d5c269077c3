"""torch_npu.contrib's FastBatchNorm1d/2d/3d and FastSyncBatchNorm: torch.nn's batch norms with an int32 step
counter — the same outputs, gradients and running statistics as nn.BatchNorm on the CPU, torch_npu's errors."""

import pytest
import torch
from error_cases import raises_exactly

from torch_npu.contrib.module import (
    DCNv2,
    FastBatchNorm1d,
    FastBatchNorm2d,
    FastBatchNorm3d,
    FastSyncBatchNorm,
    ModulatedDeformConv,
)

CASES = [
    (FastBatchNorm1d, torch.nn.BatchNorm1d, (6, 4)),
    (FastBatchNorm1d, torch.nn.BatchNorm1d, (6, 4, 5)),
    (FastBatchNorm2d, torch.nn.BatchNorm2d, (3, 4, 5, 2)),
    (FastBatchNorm3d, torch.nn.BatchNorm3d, (2, 4, 3, 2, 2)),
]


@pytest.mark.parametrize("fast, plain, shape", CASES)
@pytest.mark.parametrize("momentum", [0.1, None])
def test_trains_like_torch_batch_norm_on_the_cpu(fast, plain, shape, momentum):
    fast_bn, cpu_bn = fast(4, momentum=momentum).npu(), plain(4, momentum=momentum)
    for _ in range(3):
        x = torch.randn(shape)
        x_npu = x.npu().requires_grad_(True)
        x_cpu = x.clone().requires_grad_(True)
        out_npu, out_cpu = fast_bn(x_npu), cpu_bn(x_cpu)
        (out_npu * out_npu).sum().backward()
        (out_cpu * out_cpu).sum().backward()
        assert torch.equal(out_npu.detach().cpu(), out_cpu.detach())
        assert torch.equal(x_npu.grad.cpu(), x_cpu.grad)
    assert fast_bn.num_batches_tracked.dtype == torch.int32 and int(fast_bn.num_batches_tracked) == 3
    assert torch.equal(fast_bn.running_mean.cpu(), cpu_bn.running_mean)
    assert torch.equal(fast_bn.running_var.cpu(), cpu_bn.running_var)
    assert torch.equal(fast_bn.weight.grad.cpu(), cpu_bn.weight.grad)
    fast_bn.eval(), cpu_bn.eval()
    x = torch.randn(shape)
    assert torch.equal(fast_bn(x.npu()).detach().cpu(), cpu_bn(x).detach())


def test_loads_a_plain_batch_norm_checkpoint_and_keeps_the_int32_counter():
    plain = torch.nn.BatchNorm2d(3)
    plain(torch.randn(2, 3, 4, 4))
    fast = FastBatchNorm2d(3).npu()
    fast.load_state_dict(plain.state_dict())
    assert fast.num_batches_tracked.dtype == torch.int32 and int(fast.num_batches_tracked) == 1
    assert torch.equal(fast.running_mean.cpu(), plain.running_mean)
    assert FastBatchNorm2d(3, track_running_stats=False).num_batches_tracked is None


def test_sync_batch_norm_without_a_group_is_a_batch_norm():
    x = torch.randn(4, 3, 5)
    sync, plain = FastSyncBatchNorm(3).npu(), torch.nn.BatchNorm1d(3)
    assert torch.equal(sync(x.npu()).detach().cpu(), plain(x).detach())
    assert sync.num_batches_tracked.dtype == torch.int32 and int(sync.num_batches_tracked) == 1
    converted = FastSyncBatchNorm.convert_sync_batchnorm(torch.nn.Sequential(torch.nn.BatchNorm1d(3)))
    assert type(converted[0]) is torch.nn.SyncBatchNorm


def test_dcnv2_is_the_modulated_deformable_convolution():
    assert DCNv2 is ModulatedDeformConv


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: FastBatchNorm1d(4)(torch.randn(2, 4, 3, 3)), "expected 2D or 3D input1 (got 4D input1)"),
        (lambda: FastBatchNorm2d(4)(torch.randn(2, 4)), "expected 4D input1 (got 2D input1)"),
        (lambda: FastBatchNorm3d(4)(torch.randn(2, 4, 3, 3)), "expected 5D input1 (got 4D input1)"),
        (lambda: FastSyncBatchNorm(4)(torch.randn(2, 4)), "SyncBatchNorm expected input1 tensor to be on NPU or GPU"),
        (lambda: FastSyncBatchNorm(4).npu()(torch.randn(4).npu()), "expected at least 2D input1 (got 1D input1)"),
        (
            lambda: FastSyncBatchNorm(0).npu()(torch.randn(2, 0, 3).npu()),
            "SyncBatchNorm number of input1 channels should be non-zero",
        ),
    ],
)
def test_bad_input_gets_torch_npus_error(call, message):
    raises_exactly(call, ValueError, message)
