"""Ring attention for npu tensors under PyTorch's context parallelism.

Inside ``context_parallel(mesh, ...)`` PyTorch turns the query, key and value of
``F.scaled_dot_product_attention`` into DTensors sharded on the sequence dimension (2) and lets DTensor's
dispatcher hand the attention operator to a ring-attention handler, which rotates the key/value shards around
the mesh and merges the partial results by their log-sum-exp. PyTorch has handlers for the operators SDPA takes
on CUDA (flash, efficient, cuDNN); on the card torch_npu adds its own for ``npu_fusion_attention_v3``, the
operator its SDPA takes. SDPA of npu tensors on vnpu takes the CPU's fused kernel
(``_scaled_dot_product_flash_attention_for_cpu``, so results equal the CPU's), so the handlers here cover that
operator and its backward, plus ``npu_fusion_attention_v3`` / ``npu_fusion_attention_grad_v3`` for code that calls
torch_npu's operator on sequence-sharded DTensors, as on the card. The ring itself (rotation, causal skipping,
head-tail load balancing, the merge) is PyTorch's ``_templated_ring_attention``; each step runs one local
attention operator.

What the ring cannot do is refused by name: an arbitrary attention mask, dropout, or (for the npu operator)
layouts other than BNSD and per-sequence inputs, whose values are tied to global positions.
"""

import inspect
from typing import NamedTuple

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.distributed.tensor.experimental._context_parallel import _attention as _ring

__all__ = ["handlers"]

aten = torch.ops.aten
SEQ_DIM = 2
_SDPA = aten._scaled_dot_product_flash_attention_for_cpu.default
_SDPA_BACKWARD = aten._scaled_dot_product_flash_attention_for_cpu_backward.default
_STATS = 8  # npu_fusion_attention's softmax_max / softmax_sum repeat each row's value 8 times


class _Layout(NamedTuple):
    """How context parallelism lays out the attention inputs: the mesh, the placements, and the mesh dimension
    sharding the sequence, whose process group is the ring. Other mesh dimensions may shard batch or heads (tensor
    parallel, a 2-D TP x CP mesh), which attention computes apart, or replicate."""

    mesh: DeviceMesh
    placements: tuple
    ring_dim: int

    def ring(self):
        return self.mesh.get_group(self.ring_dim)

    def shard(self, *tensors):
        return tuple(DTensor.from_local(t, self.mesh, self.placements, run_check=False) for t in tensors)

    def replicate(self, tensor):
        return DTensor.from_local(tensor, self.mesh, [Replicate()] * self.mesh.ndim, run_check=False)


_APART = (Shard(0), Shard(1))  # batch and heads: attention computes each on its own


def _local(op_name, args):
    """The local shards of the DTensors in args (other values as they are) and their _Layout."""
    layout, local = None, []
    for arg in args:
        if isinstance(arg, DTensor):
            placements = tuple(arg.placements)
            ring = [dim for dim, p in enumerate(placements) if p == Shard(SEQ_DIM)]
            if len(ring) != 1 or not all(p in _APART or p.is_replicate() for p in placements if p != Shard(SEQ_DIM)):
                raise NotImplementedError(
                    f"{op_name} in context parallel needs inputs sharded on the sequence dimension (Shard(2)) by one "
                    f"mesh dimension and at most on batch or heads (Shard(0), Shard(1)) by the others, got "
                    f"{placements} on a {arg.device_mesh.ndim}-D mesh."
                )
            layout = _Layout(arg.device_mesh, placements, ring[0])
            arg = arg.to_local()
        local.append(arg)
    return local, layout


def _refuse(op_name, what):
    raise NotImplementedError(f"{op_name} in context parallel does not support {what}.")


def _sdpa_arguments(query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    if attn_mask is not None:
        _refuse("scaled_dot_product_attention", "attn_mask (use is_causal for causal attention)")
    if dropout_p:
        _refuse("scaled_dot_product_attention", f"dropout (dropout_p={dropout_p})")
    return query, key, value, is_causal, scale


def _sdpa(op_call, args, kwargs):
    (query, key, value), layout = _local("scaled_dot_product_attention", args[:3])
    _, _, _, is_causal, scale = _sdpa_arguments(*args, **kwargs)
    out, lse = _ring._templated_ring_attention(
        layout.ring(), SEQ_DIM, _SDPA, query=query, key=key, value=value, is_causal=is_causal, scale=scale
    )
    return layout.shard(out, lse)


def _sdpa_backward_arguments(grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, *, attn_mask=None,
                             scale=None):  # fmt: skip
    _sdpa_arguments(query, key, value, dropout_p, is_causal, attn_mask=attn_mask)
    return is_causal, scale


def _sdpa_backward(op_call, args, kwargs):
    local, layout = _local("scaled_dot_product_attention", args[:6])
    is_causal, scale = _sdpa_backward_arguments(*args, **kwargs)
    grad_out, query, key, value, out, lse = local
    grads = _ring._templated_ring_attention_backward(
        layout.ring(), SEQ_DIM, _SDPA_BACKWARD, grad_out=grad_out, grad_out_name="grad_out", query=query,
        key=key, value=value, out=out, logsumexp=lse, is_causal=is_causal, dropout_p=0.0, scale=scale,
    )  # fmt: skip
    return layout.shard(*grads[:3])


# ---- npu_fusion_attention_v3 -------------------------------------------------------------------------------

_FA = "npu_fusion_attention_v3"
_UNSUPPORTED = ("pse", "padding_mask", "prefix", "actual_seq_qlen", "actual_seq_kvlen", "sink")
_BIG = 2147483647


def _fa_options(bound):
    """is_causal of a v3 call the ring can run: BNSD, full attention (sparse_mode 0, no mask) or causal (sparse
    modes 2 and 3 with their compressed mask), no dropout, no per-sequence inputs."""
    a = bound.arguments
    if a["input_layout"] != "BNSD":
        _refuse(_FA, f"input_layout={a['input_layout']!r} (BNSD only)")
    present = [name for name in _UNSUPPORTED if a.get(name) is not None]
    if present:
        _refuse(_FA, ", ".join(present) + " (values tied to global sequence positions)")
    if a.get("keep_prob", 1.0) < 1.0:
        _refuse(_FA, f"dropout (keep_prob={a['keep_prob']})")
    if a.get("softmax_layout", ""):
        _refuse(_FA, f"softmax_layout={a['softmax_layout']!r}")
    if (a.get("pre_tockens", _BIG), a.get("next_tockens", _BIG)) != (_BIG, _BIG):
        _refuse(_FA, "pre_tockens / next_tockens bands")
    sparse_mode, has_mask = a.get("sparse_mode", 0), a.get("atten_mask") is not None
    if (sparse_mode, has_mask) not in ((0, False), (2, True), (3, True)):
        _refuse(
            _FA,
            f"sparse_mode={sparse_mode} with{'' if has_mask else 'out'} atten_mask (full attention is sparse_mode 0 "
            "without a mask, causal attention sparse_mode 2 or 3 with its compressed mask)",
        )
    return sparse_mode != 0


def _causal_mask(query, key):
    return torch.ones(query.shape[SEQ_DIM], key.shape[SEQ_DIM], dtype=torch.bool, device=query.device).triu(1)


def _expand_stats(rows):
    return rows.unsqueeze(-1).expand(*rows.shape, _STATS).contiguous()


def _fa(op_call, args, kwargs):
    from torch_npu.ops.fusion_attention_v3 import npu_fusion_attention_v3

    bound = inspect.signature(npu_fusion_attention_v3).bind(*args, **kwargs)
    is_causal = _fa_options(bound)
    (query, key, value), layout = _local(_FA, args[:3])
    head_num, scale = bound.arguments["head_num"], bound.arguments.get("scale", 1.0)
    row_max = []  # the largest score of each query row over the steps that saw it (the tail half on partial steps)

    def step(query, key, value, *, is_causal):
        out, smax, ssum, *_ = op_call(
            query, key, value, head_num, "BNSD", atten_mask=_causal_mask(query, key) if is_causal else None,
            scale=scale,
        )  # fmt: skip
        step_max = smax[..., 0]
        if not row_max:
            row_max.append(step_max)
        else:
            tail = row_max[0].shape[SEQ_DIM] - step_max.shape[SEQ_DIM]
            merged = torch.maximum(row_max[0].narrow(SEQ_DIM, tail, step_max.shape[SEQ_DIM]), step_max)
            row_max[0] = torch.cat([row_max[0].narrow(SEQ_DIM, 0, tail), merged], SEQ_DIM)
        return out, step_max + torch.log(ssum[..., 0])

    out, lse = _ring._templated_ring_attention(
        layout.ring(), SEQ_DIM, step, query=query, key=key, value=value, is_causal=is_causal
    )
    softmax_max = _expand_stats(row_max[0])
    softmax_sum = _expand_stats(torch.exp(lse - row_max[0]))
    seed = layout.replicate(query.new_zeros(1, dtype=torch.int64))
    return (*layout.shard(out, softmax_max, softmax_sum), layout.replicate(query.new_empty(0)), seed, seed)


def _fa_grad(op_call, args, kwargs):
    from torch_npu.ops.fusion_attention_v3 import npu_fusion_attention_grad_v3

    bound = inspect.signature(npu_fusion_attention_grad_v3).bind(*args, **kwargs)
    is_causal = _fa_options(bound)
    a = bound.arguments
    (query, key, value, dy), layout = _local(_FA, args[:4])
    (softmax_max, softmax_sum, out), _ = _local(_FA, (a["softmax_max"], a["softmax_sum"], a["attention_in"]))
    lse = softmax_max[..., 0] + torch.log(softmax_sum[..., 0])
    head_num, scale = a["head_num"], a.get("scale_value", 1.0)

    def step(*, query, key, value, out, logsumexp, is_causal, dy):
        stats = _expand_stats(logsumexp)
        dq, dk, dv, _, _ = op_call(
            query, key, value, dy, head_num, "BNSD", atten_mask=_causal_mask(query, key) if is_causal else None,
            softmax_max=stats, softmax_sum=torch.ones_like(stats), attention_in=out, scale_value=scale,
        )  # fmt: skip
        return dq, dk, dv

    grads = _ring._templated_ring_attention_backward(
        layout.ring(), SEQ_DIM, step, grad_out=dy, grad_out_name="dy", query=query, key=key, value=value,
        out=out, logsumexp=lse, is_causal=is_causal,
    )  # fmt: skip
    empty = layout.replicate(query.new_empty(0))
    return (*layout.shard(*grads[:3]), empty, empty)


def handlers():
    """DTensor custom-operator handlers: operator -> handler(op_call, args, kwargs)."""
    return {
        _SDPA: _sdpa,
        _SDPA_BACKWARD: _sdpa_backward,
        torch.ops.npu.npu_fusion_attention_v3.default: _fa,
        torch.ops.npu.npu_fusion_attention_grad_v3.default: _fa_grad,
    }
