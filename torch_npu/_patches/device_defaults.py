"""Defaults of torch that name a device, set for npu as torch_npu sets them (applied from the patch registry)."""

import torch


def checkpoint_device_type():
    """torch.utils.checkpoint saves and restores the RNG state of its default device type: npu."""
    torch.utils.checkpoint.DefaultDeviceType.set_device_type("npu")
    return True


def lazy_modules_allow_npu():
    """Lazy modules' uninitialized parameters may be moved with Tensor.npu, as with Tensor.cuda."""
    allowed = torch.nn.parameter.UninitializedTensorMixin._allowed_methods
    if torch.Tensor.npu in allowed:
        return False
    allowed.append(torch.Tensor.npu)
    return True


def backward_on_the_importing_thread():
    """The autograd engine runs a non-CPU device's backward on a worker thread; npu kernels run on the host
    anyway, so the importing thread (usually the main one) keeps backward on itself and saves the thread hop.
    The setting is per thread: other threads keep PyTorch's default."""
    torch.autograd.set_multithreading_enabled(False)
    return True


def sharded_grad_scaler_is_npus():
    """torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler is torch_npu's _ShardedGradScaler."""
    from torch.distributed.fsdp import sharded_grad_scaler

    from torch_npu.npu.amp.sharded_grad_scaler import sharded_grad_scaler_class

    ours = sharded_grad_scaler_class(sharded_grad_scaler.ShardedGradScaler)
    if sharded_grad_scaler.ShardedGradScaler is ours:
        return False
    sharded_grad_scaler.ShardedGradScaler = ours
    return True
