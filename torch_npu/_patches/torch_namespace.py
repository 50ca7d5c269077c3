"""What vnpu adds to the torch namespace itself, as torch_npu does (applied from the patch registry)."""

import functools
import warnings

import torch


def _deprecated_alias(name):
    def deprecated(*args, **kwargs):
        from torch_npu.utils._error_code import ErrCode, pta_error

        raise RuntimeError(
            f"torch.{name} is deprecated and will be removed in future version. Use torch_npu.{name} instead."
            + pta_error(ErrCode.NOT_SUPPORT)
        )

    deprecated.__name__ = name
    return deprecated


def _add_alias(name):
    # torch_npu's old home for its operators: every one of the npu namespace torch does not define itself
    if not hasattr(torch, name):
        setattr(torch, name, _deprecated_alias(name))


def deprecated_operator_aliases():
    """torch.<name> for each operator of the npu namespace torch lacks (torch_npu's and those defined later
    with npu_op), raising torch_npu's deprecation error."""
    from torch_npu.ops.registration import EXPORT_LISTENERS, EXPORTED

    defined = {
        op.split("::", 1)[1].split(".", 1)[0] for op in torch._C._dispatch_get_all_op_names() if op.startswith("npu::")
    }
    for name in sorted(defined | set(EXPORTED)):
        _add_alias(name)
    EXPORT_LISTENERS.append(_add_alias)
    return True


def tensor_format_cast_methods():
    """Tensor.npu_format_cast / npu_format_cast_ (torch_npu's Tensor methods), customize_dtype passed on."""
    from torch_npu.ops.format_cast import npu_format_cast, npu_format_cast_

    def npu_format_cast_method(self, acl_format, customize_dtype=None):
        return npu_format_cast(self, acl_format, customize_dtype=customize_dtype)

    def npu_format_cast__method(self, src, customize_dtype=None):
        return npu_format_cast_(self, src, customize_dtype=customize_dtype)

    npu_format_cast_method.__name__, npu_format_cast__method.__name__ = "npu_format_cast", "npu_format_cast_"
    torch.Tensor.npu_format_cast = npu_format_cast_method
    torch.Tensor.npu_format_cast_ = npu_format_cast__method
    return True


def tensor_copy_memory_method():
    """Tensor.copy_memory_(src, non_blocking=False) (torch_npu's Tensor method)."""

    def copy_memory_(self, src, non_blocking=False):
        return torch.ops.npu.copy_memory_(self, src, non_blocking)

    torch.Tensor.copy_memory_ = copy_memory_
    return True


def hccl_in_torch_distributed():
    """torch.distributed.is_hccl_available, and init_process_group bounding its rendezvous by
    HCCL_CONNECT_TIMEOUT for hccl (other backends are passed through unchanged)."""
    import torch.distributed as dist

    if not dist.is_available() or getattr(dist.init_process_group, "__vnpu_hccl__", False):
        return False
    from torch_npu.distributed.process_group_hccl import _connect_timeout_bounds_rendezvous, is_hccl_available

    dist.is_hccl_available = is_hccl_available
    dist.init_process_group = _connect_timeout_bounds_rendezvous(dist.init_process_group)
    return True


def npugraph_mark_step_begin():
    """torch.compiler.npugraph_mark_step_begin(): starts a new step of the NPU graph trees; the function is
    torch_npu.utils._graph_tree's, as with torch_npu (the trees load when it is first called)."""
    from torch_npu.utils._graph_tree import npugraph_mark_step_begin as mark

    torch.compiler.npugraph_mark_step_begin = mark
    return True


def _warns_deprecated(func, name, message):
    @functools.wraps(func)
    def deprecated(*args, **kwargs):
        warnings.warn(message)
        return func(*args, **kwargs)

    deprecated.__name__ = name
    return deprecated


def byte_mask_dropout_in_torch_nn():
    """torch.nn.DropoutWithByteMask and torch.nn.functional.dropout_with_byte_mask: torch_npu's old homes of the
    contrib layer and function, each call warning (UserWarning) with torch_npu's deprecation text."""
    from torch_npu.contrib.function.npu_functional import dropout_with_byte_mask
    from torch_npu.contrib.module.npu_modules import DropoutWithByteMask

    torch.nn.DropoutWithByteMask = _warns_deprecated(
        DropoutWithByteMask,
        "DropoutWithByteMask",
        "torch.nn.DropoutWithByteMask is deprecated and will be removed in future version. "
        "Use torch_npu.contrib.module.DropoutWithByteMask instead.",
    )
    torch.nn.functional.dropout_with_byte_mask = _warns_deprecated(
        dropout_with_byte_mask,
        "dropout_with_byte_mask",
        "torch.nn.functional.dropout_with_byte_mask is deprecated and will be removed in future version. "
        "Use torch_npu.contrib.function.dropout_with_byte_mask instead.",
    )
    return True
