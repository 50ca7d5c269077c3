"""vjp: the vector-Jacobian product of a differentiable forward, for the backward operators torch_npu exposes by
name next to forwards vnpu differentiates by autograd (one exact gradient, no second formula to drift)."""

import contextlib

import torch

__all__ = ["recording_gradients", "vjp"]

_KEY = torch._C.DispatchKey
# The dispatch keys autograd needs; a kernel may run with them excluded (below autograd, or inside a compiled graph's
# dispatch mode), and the gradient has to be taken all the same.
_AUTOGRAD_KEYS = (_KEY.AutogradFunctionality, _KEY.AutogradOther, _KEY.AutogradNestedTensor, _KEY.ADInplaceOrView)


@contextlib.contextmanager
def recording_gradients():
    """Lets autograd record inside a kernel (torch.enable_grad with the thread's excluded dispatch keys minus
    autograd's), for kernels that take a gradient of their own composition."""
    exclude = torch._C._dispatch_tls_local_exclude_set()
    for key in _AUTOGRAD_KEYS:
        exclude = exclude.remove(key)
    with torch._C._ForceDispatchKeyGuard(torch._C._dispatch_tls_local_include_set(), exclude), torch.enable_grad():
        yield


def vjp(forward, inputs, wanted, cotangents):
    """Gradients of forward(*inputs)'s outputs, weighted by cotangents (None skips an output), with respect to the
    inputs at the positions in `wanted` (zeros where an output does not reach one)."""
    leaves = list(inputs)
    for i in wanted:
        leaves[i] = inputs[i].detach().requires_grad_(True)
    with recording_gradients():
        outputs = forward(*leaves)
        outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
        pairs = [(o, c) for o, c in zip(outputs, cotangents) if c is not None]
        targets = [leaves[i] for i in wanted]
        found = torch.autograd.grad(
            [o for o, _ in pairs], targets, [c.to(o.dtype) for o, c in pairs], allow_unused=True
        )
    return [torch.zeros_like(t) if g is None else g for g, t in zip(found, targets)]
