"""GradScaler for FSDP-sharded models on npu (torch_npu.npu.amp.sharded_grad_scaler)."""

from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

__all__ = ["_ShardedGradScaler"]


class _ShardedGradScaler(ShardedGradScaler):
    """torch's ShardedGradScaler with npu as the default device: unscaling and the inf checks run
    on npu, and the found-inf flags are all-reduced across the process group."""

    def __init__(
        self,
        device="npu",
        init_scale=2.0**16,
        backoff_factor=0.5,
        growth_factor=2.0,
        growth_interval=2000,
        enabled=True,
        process_group=None,
    ):
        from torch.distributed.distributed_c10d import _get_default_group

        if process_group is None:
            import torch.distributed as dist

            process_group = _get_default_group() if dist.is_available() and dist.is_initialized() else None
        super().__init__(
            device=device,
            init_scale=init_scale,
            backoff_factor=backoff_factor,
            growth_factor=growth_factor,
            growth_interval=growth_interval,
            enabled=enabled,
            process_group=process_group,
        )
