"""npu_fusion_attention (and its grad, and their v3 forms) on DTensors: data parallel over the batch dimension and
tensor parallel over the heads, as torch_npu runs them.

Attention treats every batch entry and every head on its own, so q/k/v (and dy, the forward's output and its
softmax statistics) may be sharded over the batch dimension of their layout or over its head dimension; the operator
then runs on each rank's shard and its outputs are sharded alike. The call on a shard is the operator with
``head_num`` set to the heads the shard holds (the reason these operators need a handler rather than a plain
sharding rule). Per mesh dimension the placement is the query's when it is one of those two shards, and replication
otherwise; every tensor argument is redistributed to match (an attention mask with a batch or head dimension of its
own is sharded with it, a broadcast one replicated). Inputs whose values are tied to positions across the batch or
the sequence (pse, padding_mask, prefix, actual sequence lengths, sink) and dropout leave everything replicated.
"""

import torch
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.distributed.tensor._dtensor_spec import DTensorSpec, TensorMeta
from torch.distributed.tensor._redistribute import redistribute_local_tensor

__all__ = ["attention_handlers"]

_POSITIONAL = ("pse", "padding_mask", "prefix", "actual_seq_qlen", "actual_seq_kvlen", "sink")
_LIKE_QUERY = ("query", "key", "value", "dy", "attention_in")
_STATS = ("softmax_max", "softmax_sum")


def _arguments(op, args, kwargs):
    names = [a.name for a in op._schema.arguments]
    return {**dict(zip(names, args)), **kwargs}


def _sharded_dims(a):
    """(batch dim, head dim) of the layout, None where the layout has none or sharding is not allowed."""
    if any(a.get(name) is not None for name in _POSITIONAL) or a.get("keep_prob", 1.0) < 1.0:
        return None, None
    layout = a["input_layout"]
    return (layout.index("B") if "B" in layout else None), (layout.index("N") if "N" in layout else None)


def _placements(query, batch_dim, head_dim):
    """Per mesh dimension: the query's shard of the batch or head dimension, else replication."""
    keep = {Shard(d) for d in (batch_dim, head_dim) if d is not None}
    placements = query.placements if isinstance(query, DTensor) else ()
    return tuple(p if p in keep else Replicate() for p in placements)


def _role_placement(name, value, placement, batch_dim, head_dim):
    """The placement argument `name` needs on a mesh dimension where the query has `placement`."""
    if placement == Replicate():
        return Replicate()
    on_heads = placement == Shard(head_dim) if head_dim is not None else False
    if name in _LIKE_QUERY:
        return placement
    if name in _STATS:  # [B, N, S, 8]; TND: [T, N, 8]
        return Shard(1) if on_heads else Shard(0)
    if name == "atten_mask":  # [B, N, S1, S2] / [B, 1, S1, S2] / [1, 1, S1, S2] / [S1, S2]
        dim = 1 if on_heads else 0
        return Shard(dim) if value.dim() == 4 and value.shape[dim] != 1 else Replicate()
    return Replicate()


def _local(value, mesh, target):
    if isinstance(value, DTensor):
        current = value._spec
        local = value.to_local()
    else:  # a plain tensor among DTensors counts as replicated
        current = DTensorSpec(mesh, (Replicate(),) * mesh.ndim, TensorMeta(value.shape, value.stride(), value.dtype))
        local = value
    wanted = DTensorSpec(mesh, target, current.tensor_meta)
    return local if current.placements == target else redistribute_local_tensor(local, current, wanted)


def _wrap(local, mesh, placements, global_sizes):
    """A DTensor of the operator's output `local`, sharded as `placements`; global_sizes gives the global size of
    each dimension it may be sharded on (outputs are sharded where their inputs are)."""
    if not isinstance(local, torch.Tensor):
        return local
    shape = list(local.shape)
    for p in placements:
        if isinstance(p, Shard):
            shape[p.dim] = global_sizes[p.dim]
    stride = torch.empty(shape, device="meta").stride()
    return DTensor.from_local(local, mesh, placements, run_check=False, shape=torch.Size(shape), stride=stride)


def _handler(is_grad):
    def handle(op_call, args, kwargs):
        a = _arguments(op_call, args, kwargs)
        mesh = next(v.device_mesh for v in a.values() if isinstance(v, DTensor))
        batch_dim, head_dim = _sharded_dims(a)
        placements = _placements(a["query"], batch_dim, head_dim) or (Replicate(),) * mesh.ndim
        local = {}
        for name, value in a.items():
            if isinstance(value, torch.Tensor):
                target = tuple(_role_placement(name, value, p, batch_dim, head_dim) for p in placements)
                value = _local(value, mesh, target)
            local[name] = value
        if head_dim is not None:
            local["head_num"] = local["query"].shape[head_dim]
        results = op_call(**local)
        replicated = (Replicate(),) * mesh.ndim
        if is_grad:  # dq, dk, dv like query, key, value; then dpse, dsink
            outputs = [(placements, dict(enumerate(a[name].shape))) for name in ("query", "key", "value")]
        else:  # out like the query; softmax_max / softmax_sum [B, N, ...] (TND: [T, N, ...]); then the rest
            stats = tuple(_role_placement("softmax_max", None, p, batch_dim, head_dim) for p in placements)
            sizes = {1: a["query"].shape[head_dim]} if head_dim is not None else {}
            if batch_dim is not None:
                sizes[0] = a["query"].shape[batch_dim]
            outputs = [(placements, dict(enumerate(a["query"].shape))), (stats, sizes), (stats, sizes)]
        outputs += [(replicated, {})] * (len(results) - len(outputs))
        return tuple(_wrap(r, mesh, p, sizes) for r, (p, sizes) in zip(results, outputs))

    return handle


def attention_handlers():
    """DTensor custom-operator handlers of the fusion-attention operators."""
    npu = torch.ops.npu
    return {
        npu.npu_fusion_attention.default: _handler(is_grad=False),
        npu.npu_fusion_attention_v3.default: _handler(is_grad=False),
        npu.npu_fusion_attention_grad.default: _handler(is_grad=True),
        npu.npu_fusion_attention_grad_v3.default: _handler(is_grad=True),
    }


def install_attention_handlers():
    """Add the handlers to DTensor's dispatcher (in place, so copies of the table made later hold them too)."""
    DTensor._op_dispatcher._custom_op_handlers.update(attention_handlers())
    return True
