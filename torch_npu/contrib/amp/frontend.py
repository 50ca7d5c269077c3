"""amp.initialize and amp.scale_loss (see torch_npu.contrib.amp)."""

import contextlib
import functools

import torch

from torch_npu.contrib.amp.loss_scaler import LossScaler
from torch_npu.utils._vnpu_extensions import warn_extension

__all__ = ["initialize", "scale_loss", "master_params", "state_dict", "load_state_dict"]

_OPT_LEVELS = {
    # cast_model_type, autocast, master_weights, keep_batchnorm_fp32, default loss_scale
    "O0": (None, False, False, None, 1.0),
    "O1": (None, True, False, None, "dynamic"),
    "O2": (torch.float16, False, True, True, "dynamic"),
    "O3": (torch.float16, False, False, False, 1.0),
}


class _AmpState:
    def __init__(self):
        self.opt_level = None
        self.scalers = []


_state = _AmpState()


def _cast_tensors(value, dtype):
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() else value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_tensors(v, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast_tensors(v, dtype) for k, v in value.items()}
    return value


def _cast_model(model, dtype, keep_batchnorm_fp32):
    for module in model.modules():
        is_bn = isinstance(module, torch.nn.modules.batchnorm._BatchNorm)
        if is_bn and keep_batchnorm_fp32:
            continue
        for param in module.parameters(recurse=False):
            if param.is_floating_point():
                param.data = param.data.to(dtype)
        for name, buf in module.named_buffers(recurse=False):
            if buf.is_floating_point():
                setattr(module, name, buf.to(dtype))
    forward = model.forward

    @functools.wraps(forward)
    def cast_forward(*args, **kwargs):
        out = forward(*_cast_tensors(args, dtype), **_cast_tensors(kwargs, dtype))
        return _cast_tensors(out, torch.float32)

    model.forward = cast_forward


def _autocast_model(model):
    forward = model.forward

    @functools.wraps(forward)
    def autocast_forward(*args, **kwargs):
        with torch.autocast("npu", dtype=torch.float16):
            out = forward(*args, **kwargs)
        return _cast_tensors(out, torch.float32)

    model.forward = autocast_forward


def _add_master_weights(optimizer):
    """Replace the optimizer's float16 parameters by float32 masters; copy back after each step."""
    pairs = []
    for group in optimizer.param_groups:
        masters = []
        for p in group["params"]:
            if p.dtype == torch.float16:
                master = p.detach().float().requires_grad_(True)
                pairs.append((p, master))
                masters.append(master)
            else:
                masters.append(p)
        group["params"] = masters
    optimizer._amp_master_pairs = pairs
    step = optimizer.step

    @functools.wraps(step)
    def step_and_copy_back(*args, **kwargs):
        result = step(*args, **kwargs)
        with torch.no_grad():
            for model_param, master in pairs:
                model_param.copy_(master)
        return result

    optimizer.step = step_and_copy_back
    zero_grad = optimizer.zero_grad

    @functools.wraps(zero_grad)
    def zero_both(set_to_none=True):
        zero_grad(set_to_none=set_to_none)
        for model_param, _ in pairs:
            model_param.grad = None

    optimizer.zero_grad = zero_both


def initialize(
    models,
    optimizers=None,
    enabled=True,
    opt_level="O1",
    cast_model_type=None,
    keep_batchnorm_fp32=None,
    master_weights=None,
    loss_scale=None,
    min_loss_scale=None,
    max_loss_scale=2.0**24,
    num_losses=1,
    verbosity=1,
    **kwargs,
):
    """Prepare model(s) and optimizer(s) for mixed precision; returns them like apex.amp.initialize."""
    warn_extension("torch_npu.contrib.amp", "apex-style mixed precision (Ascend's apex provides amp on hardware)")
    if opt_level not in _OPT_LEVELS:
        raise RuntimeError(f"Unexpected optimization level {opt_level}. Options are 'O0', 'O1', 'O2', 'O3'.")
    model_list = models if isinstance(models, (list, tuple)) else [models]
    optim_list = [] if optimizers is None else (optimizers if isinstance(optimizers, (list, tuple)) else [optimizers])
    if not enabled:
        return models if optimizers is None else (models, optimizers)
    default_cast, use_autocast, default_master, default_keep_bn, default_scale = _OPT_LEVELS[opt_level]
    cast = cast_model_type if cast_model_type is not None else default_cast
    keep_bn = keep_batchnorm_fp32 if keep_batchnorm_fp32 is not None else default_keep_bn
    master = master_weights if master_weights is not None else default_master
    scale = loss_scale if loss_scale is not None else default_scale
    for model in model_list:
        if cast is not None:
            _cast_model(model, cast, keep_bn)
        elif use_autocast:
            _autocast_model(model)
    if master:
        for optimizer in optim_list:
            _add_master_weights(optimizer)
    _state.opt_level = opt_level
    _state.scalers = [
        LossScaler(scale, min_loss_scale=min_loss_scale, max_loss_scale=max_loss_scale, verbose=verbosity > 0)
        for _ in range(num_losses)
    ]
    if verbosity > 0:
        print(f"Selected optimization level {opt_level}")
    if optimizers is None:
        return models
    return models, optimizers


def _params_of(optimizers):
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            yield from group["params"]


@contextlib.contextmanager
def scale_loss(loss, optimizers, loss_id=0, model=None, delay_unscale=False, delay_overflow_check=False):
    """Yield loss * loss_scale for backward(); on exit, unscale the gradients into the (master)
    parameters and, on overflow, make the next optimizer.step() a no-op and lower the scale."""
    if not _state.scalers:
        raise RuntimeError("Call torch_npu.contrib.amp.initialize() before amp.scale_loss()")
    optimizers = optimizers if isinstance(optimizers, (list, tuple)) else [optimizers]
    scaler = _state.scalers[loss_id]
    yield loss.float() * scaler.loss_scale()
    if delay_unscale:
        return
    for optimizer in optimizers:
        for model_param, master in getattr(optimizer, "_amp_master_pairs", []):
            if model_param.grad is not None:
                master.grad = model_param.grad.detach().float()
    overflow = scaler.unscale_([p for p in _params_of(optimizers) if p.grad is not None])
    if overflow:
        for optimizer in optimizers:
            _skip_next_step(optimizer)


def _skip_next_step(optimizer):
    step = optimizer.step

    def skipped(*args, **kwargs):
        optimizer.step = step
        for group in optimizer.param_groups:
            for p in group["params"]:
                p.grad = None

    optimizer.step = skipped


def master_params(optimizer):
    """The parameters the optimizer updates (float32 masters under O2)."""
    for group in optimizer.param_groups:
        yield from group["params"]


def state_dict():
    return {f"loss_scaler{i}": s.state_dict() for i, s in enumerate(_state.scalers)}


def load_state_dict(state):
    for i, scaler in enumerate(_state.scalers):
        scaler.load_state_dict(state[f"loss_scaler{i}"])
