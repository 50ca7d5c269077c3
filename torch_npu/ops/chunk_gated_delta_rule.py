"""npu_chunk_gated_delta_rule: the gated delta rule over whole sequences (prefill), from one initial state per
sequence to its final state.

query / key [T, Nk, Dk], value [T, Nv, Dv], beta [T, Nv], g [T, Nv] (alpha = exp(g); None: 1),
actual_seq_lengths [B], initial_state [B, Nv, Dv, Dk] (None: zeros). Returns (out [T, Nv, Dv] in value's dtype,
final_state [B, Nv, Dv, Dk] in the initial state's dtype, bfloat16 without one). The card splits each sequence
into chunks and computes the chunks in parallel; the result is the recurrence of
npu_recurrent_gated_delta_rule (same formula), which vnpu computes token by token in float32.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.recurrent_gated_delta_rule import Recurrence
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_chunk_gated_delta_rule"


def _lengths(query, value, beta, g, actual_seq_lengths, initial_state):
    check(query.dim() == 3 and value.dim() == 3 and value.shape[0] == query.shape[0], _OP,
          "query / key must be [T, Nk, Dk] and value [T, Nv, Dv]")  # fmt: skip
    t, nk, dk = query.shape
    nv, dv = value.shape[1:]
    check(nv % nk == 0, _OP, f"Nv ({nv}) must be a multiple of Nk ({nk})")
    check(beta is not None and tuple(beta.shape) == (t, nv), _OP, f"beta must be [T={t}, Nv={nv}]")
    check(g is None or tuple(g.shape) == (t, nv), _OP, f"g must be [T={t}, Nv={nv}]")
    check(actual_seq_lengths is not None and actual_seq_lengths.dim() == 1, _OP, "actual_seq_lengths [B] is required")
    lengths = [int(n) for n in actual_seq_lengths.tolist()]
    check(all(n >= 0 for n in lengths) and sum(lengths) == t, _OP, f"actual_seq_lengths must sum to T={t}, got {lengths}")  # fmt: skip
    if initial_state is not None:
        want = (len(lengths), nv, dv, dk)
        check(tuple(initial_state.shape) == want, _OP, f"initial_state must be {list(want)}, got {list(initial_state.shape)}")  # fmt: skip
    return lengths


def _fake(query, key, value, *, beta=None, initial_state=None, actual_seq_lengths=None, scale=None, g=None):
    nv, dv = value.shape[1:]
    batch = actual_seq_lengths.shape[0]
    dtype = initial_state.dtype if initial_state is not None else torch.bfloat16
    return torch.empty_like(value), value.new_empty(batch, nv, dv, query.shape[-1], dtype=dtype)


@npu_op(
    "npu_chunk_gated_delta_rule(Tensor query, Tensor key, Tensor value, *, Tensor? beta=None, "
    "Tensor? initial_state=None, Tensor? actual_seq_lengths=None, float? scale=None, Tensor? g=None) "
    "-> (Tensor, Tensor)",
    fake=_fake,
)
def npu_chunk_gated_delta_rule(
    query, key, value, *, beta=None, initial_state=None, actual_seq_lengths=None, scale=None, g=None
):
    """(out [T, Nv, Dv], final_state [B, Nv, Dv, Dk])."""
    check(key.shape == query.shape, _OP, "query and key must have one shape")
    lengths = _lengths(query, value, beta, g, actual_seq_lengths, initial_state)
    nv, dv, dk = value.shape[1], value.shape[2], query.shape[2]
    dtype = initial_state.dtype if initial_state is not None else torch.bfloat16
    final = torch.empty(len(lengths), nv, dv, dk, dtype=dtype, device=value.device)
    with torch.no_grad():
        steps = Recurrence(query, key, value, beta, g, scale)
        start = 0
        for b, length in enumerate(lengths):
            s = (
                initial_state[b].float()
                if initial_state is not None
                else final.new_zeros(nv, dv, dk, dtype=torch.float32)
            )
            final[b] = steps.run(s, start, length)
            start += length
    return steps.out.to(value.dtype), final
