"""GradScaler for FSDP-sharded models on npu (torch_npu.npu.amp.sharded_grad_scaler).

The class derives from torch's ShardedGradScaler, and torch_npu installs it in torch's module under that
name (the patch registry, on import of torch.distributed.fsdp.sharded_grad_scaler); it is built once, from
torch's own class, when first needed."""

__all__ = ["_ShardedGradScaler"]  # noqa: F822 (built on first access, see __getattr__)

_class = None


def sharded_grad_scaler_class(base):
    """torch_npu's _ShardedGradScaler, derived from `base` (torch's ShardedGradScaler) the first time."""
    global _class
    if _class is not None:
        return _class

    class _ShardedGradScaler(base):
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

    _ShardedGradScaler.__module__ = __name__
    _class = _ShardedGradScaler
    return _class


def __getattr__(name):
    if name == "_ShardedGradScaler":
        # importing torch's module installs ours there (and builds it)
        from torch.distributed.fsdp import sharded_grad_scaler

        return sharded_grad_scaler_class(sharded_grad_scaler.ShardedGradScaler)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
