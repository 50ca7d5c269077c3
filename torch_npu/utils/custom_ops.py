"""Every public operator of torch.ops.npu as torch_npu.<name>, listed in torch_npu.__all__.

Operators defined with npu_op export themselves as they are defined; `bind_operators()` (run by
`import torch_npu`) also binds those of the npu namespace defined elsewhere (C++ code, or torch.library code
imported before torch_npu)."""

import torch

__all__ = []


def bind_operators():
    """Bind the torch.ops.npu operators missing from torch_npu; returns their names."""
    import torch_npu
    from torch_npu.ops.registration import _export

    names = {
        op.split("::", 1)[1].split(".", 1)[0] for op in torch._C._dispatch_get_all_op_names() if op.startswith("npu::")
    }
    bound = []
    for name in sorted(names):
        if not hasattr(torch_npu, name):
            _export(name)
            bound.append(name)
    return bound
