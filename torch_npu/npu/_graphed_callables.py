"""torch.npu.make_graphed_callables: a callable's forward and backward each captured in an NPU graph.

The returned callable copies its tensor arguments into the captured inputs, replays the forward
graph and returns the captured outputs; its backward copies the incoming gradients into the
captured gradient buffers and replays the backward graph.
"""

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from torch_npu.utils._error_code import ErrCode, graph_error


def _grad(outputs, inputs, grad_outputs, allow_unused):
    # Backward runs on this thread (not autograd's device threads) so the capture records it.
    with torch.autograd.set_multithreading_enabled(False):
        return torch.autograd.grad(
            outputs=outputs, inputs=inputs, grad_outputs=grad_outputs, only_inputs=True, allow_unused=allow_unused
        )


def _graph_one(fn, args, num_warmup_iters, allow_unused_input, pool):
    from torch_npu.npu.graphs import NPUGraph, graph

    flat_args, _ = tree_flatten(args)
    if not all(isinstance(a, torch.Tensor) for a in flat_args):
        raise TypeError(
            "In the beta API, sample_args for each callable must contain only Tensors. Other types "
            "are not allowed." + graph_error(ErrCode.TYPE)
        )
    params = tuple(fn.parameters()) if isinstance(fn, torch.nn.Module) else ()
    static_inputs = tuple(flat_args) + params
    wants_grad = [i for i in static_inputs if i.requires_grad]

    side = torch.npu.Stream()
    with torch.npu.stream(side):
        for _ in range(num_warmup_iters):
            outs = [o for o in tree_flatten(fn(*args))[0] if isinstance(o, torch.Tensor) and o.requires_grad]
            if outs and wants_grad:
                _grad(outs, wants_grad, [torch.empty_like(o) for o in outs], allow_unused_input)

    forward_graph, backward_graph = NPUGraph(), NPUGraph()
    with graph(forward_graph, pool=pool):
        outputs = fn(*args)
    flat_outputs, output_spec = tree_flatten(outputs)
    static_outputs = tuple(flat_outputs)
    static_grad_outputs = tuple(torch.empty_like(o) if o.requires_grad else None for o in static_outputs)
    grads = ()
    differentiable = [o for o in static_outputs if o.requires_grad]
    if differentiable and wants_grad:
        with graph(backward_graph, pool=pool):
            grads = _grad(
                differentiable, wants_grad, [g for g in static_grad_outputs if g is not None], allow_unused_input
            )
    grads_iter = iter(grads)
    static_grad_inputs = tuple(next(grads_iter) if i.requires_grad else None for i in static_inputs)
    num_user_args = len(flat_args)

    class Graphed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            for i in range(num_user_args):
                if static_inputs[i].data_ptr() != inputs[i].data_ptr():
                    static_inputs[i].copy_(inputs[i])
            forward_graph.replay()
            return tuple(o.detach() for o in static_outputs)

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx, *incoming):
            for grad, buffer in zip(incoming, static_grad_outputs):
                if buffer is not None and grad is not None and grad.data_ptr() != buffer.data_ptr():
                    buffer.copy_(grad)
            backward_graph.replay()
            # Copies: autograd may keep a returned gradient as a parameter's .grad, and the next
            # replay overwrites the static buffers.
            return tuple(g.detach().clone() if g is not None else None for g in static_grad_inputs)

    def graphed(*user_args):
        flat, _ = tree_flatten(user_args)
        out = Graphed.apply(*(tuple(flat) + params))
        return tree_unflatten(list(out), output_spec)

    return graphed


def make(callables, sample_args, num_warmup_iters=3, allow_unused_input=False, pool=None):
    from torch_npu.npu.graphs import graph_pool_handle

    just_one = not isinstance(callables, tuple)
    if just_one:
        callables, sample_args = (callables,), (sample_args,)
    mempool = graph_pool_handle() if pool is None else pool
    results = []
    for fn, args in zip(callables, sample_args):
        args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
        if isinstance(fn, torch.nn.Module):
            if fn._backward_hooks or fn._forward_hooks or fn._forward_pre_hooks:
                raise RuntimeError(
                    "Modules must not have hooks registered at the time they are passed. However, "
                    "registering hooks on modules after passing them through make_graphed_callables "
                    "is allowed." + graph_error(ErrCode.PARAM)
                )
            graphed = _graph_one(fn, args, num_warmup_iters, allow_unused_input, mempool)
            original_forward, training = fn.forward, fn.training

            def forward(*user_args, _graphed=graphed, _original=original_forward, _training=training, _module=fn):
                if _module.training == _training:
                    return _graphed(*user_args)
                return _original(*user_args)

            fn.forward = forward
            results.append(fn)
        else:
            results.append(_graph_one(fn, args, num_warmup_iters, allow_unused_input, mempool))
    return results[0] if just_one else tuple(results)
