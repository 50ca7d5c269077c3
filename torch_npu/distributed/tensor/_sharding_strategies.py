"""How DTensor may shard torch_npu's operators: over the dimensions the operator treats independently.

npu_rms_norm normalises over gamma's trailing dimensions, so any leading dimension of self can be sharded
(gamma replicated; rstd sharded alike). npu_rotary_mul rotates each position with r1/r2, so a dimension of
self other than the last can be sharded, r1/r2 sharded with it where they span it and replicated where
they broadcast over it. Everything replicated is always acceptable."""

__all__ = ["register_sharding_strategies"]


def _rms_norm_strategies(x, gamma, epsilon=1e-6):
    from torch.distributed.tensor import Replicate, Shard

    strategies = [([Replicate(), Replicate()], [Replicate(), Replicate(), None])]
    for dim in range(x.ndim - gamma.ndim):
        strategies.append(([Shard(dim), Shard(dim)], [Shard(dim), Replicate(), None]))
    return strategies


def _rotary_mul_strategies(x, r1, r2, rotary_mode="half", rotate=None):
    from torch.distributed.tensor import Replicate, Shard

    extra = [None, None if rotate is None else Replicate()]
    strategies = [([Replicate()], [Replicate(), Replicate(), Replicate(), *extra])]
    for dim in range(x.ndim - 1):
        tables = [Replicate() if r.shape[dim] == 1 else Shard(dim) for r in (r1, r2)]
        strategies.append(([Shard(dim)], [Shard(dim), *tables, *extra]))
    return strategies


def register_sharding_strategies():
    """Register the strategies with DTensor (torch.distributed.tensor.experimental.register_sharding)."""
    import torch
    from torch.distributed.tensor.experimental import register_sharding

    register_sharding(torch.ops.npu.npu_rms_norm.default)(_rms_norm_strategies)
    register_sharding(torch.ops.npu.npu_rotary_mul.default)(_rotary_mul_strategies)
    return True
