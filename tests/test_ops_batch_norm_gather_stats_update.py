"""batch_norm_gather_stats_update against the combination of per-rank statistics written out (global mean,
global invstd, running statistics with the unbiased variance and momentum)."""

import torch

import torch_npu


def reference(mean, invstd, running_mean, running_var, momentum, eps, counts):
    c = counts.double()[:, None]
    total = c.sum()
    global_mean = (c * mean.double()).sum(0) / total
    var_r = 1.0 / invstd.double() ** 2 - eps  # each rank's biased variance
    global_var = (c * (var_r + (mean.double() - global_mean) ** 2)).sum(0) / total
    new_rm = (1 - momentum) * running_mean.double() + momentum * global_mean
    new_rv = (1 - momentum) * running_var.double() + momentum * global_var * total / (total - 1)
    return global_mean.float(), (1 / (global_var + eps).sqrt()).float(), new_rm.float(), new_rv.float()


def test_gathered_statistics_and_running_updates():
    g = torch.Generator().manual_seed(8)
    mean, invstd = torch.randn(3, 5, generator=g), torch.rand(3, 5, generator=g) + 0.5
    counts = torch.tensor([10.0, 4.0, 7.0])
    rm, rv = torch.randn(5, generator=g), torch.rand(5, generator=g) + 1
    want = reference(mean, invstd, rm, rv, 0.1, 1e-5, counts)
    npu_rm, npu_rv = rm.npu(), rv.npu()
    got_mean, got_invstd = torch_npu.batch_norm_gather_stats_update(
        torch.empty(2, 5).npu(), mean.npu(), invstd.npu(), npu_rm, npu_rv, 0.1, 1e-5, counts.npu()
    )
    for got, expected in zip((got_mean, got_invstd, npu_rm, npu_rv), want):
        torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-5)
