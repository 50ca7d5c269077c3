"""npu_recurrent_gated_delta_rule(_functional): the gated delta rule, token by token, over variable-length
sequences with a pool of state matrices (Qwen3-Next / GDN decoding, speculative tokens included).

    S_t = alpha_t S_{t-1} + beta_t (v_t - alpha_t S_{t-1} k_t) k_t^T,   alpha_t = exp(g_t)
    o_t = scale * S_t q_t

query / key [T, Nk, Dk], value [T, Nv, Dv] (bfloat16; value head h uses key head h // (Nv / Nk)), state
[BlockNum, Nv, Dv, Dk], beta [T, Nv], g [T, Nv] float32 (None: alpha = 1), actual_seq_lengths [B] (the tokens
of each sequence, consecutive in T). ssm_state_indices [T] names each token's state slot: a sequence starts
from the slot of its token num_accepted_tokens[b] - 1 (default: its first token) and the state after each of
its tokens is written to that token's slot. The recurrence runs in float32; states are stored in the state's
dtype, outputs [T, Nv, Dv] in value's dtype. The in-place form updates `state`; the functional form returns
(output, updated copy of state).
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = ["Recurrence"]

_OP = "npu_recurrent_gated_delta_rule"
_ARGS = (
    "Tensor query, Tensor key, Tensor value, Tensor{state} state, *, Tensor? beta=None, float? scale=None, "
    "Tensor? actual_seq_lengths=None, Tensor? ssm_state_indices=None, Tensor? num_accepted_tokens=None, "
    "Tensor? g=None, Tensor? gk=None"
)


def _check(query, key, value, state, beta, actual_seq_lengths, ssm_state_indices, num_accepted_tokens, g, gk):
    check(query.dim() == 3 and key.shape == query.shape, _OP, "query and key must be [T, Nk, Dk] of one shape")
    t, nk, dk = query.shape
    check(value.dim() == 3 and value.shape[0] == t, _OP, f"value must be [T={t}, Nv, Dv], got {tuple(value.shape)}")
    nv, dv = value.shape[1], value.shape[2]
    check(nv % nk == 0, _OP, f"Nv ({nv}) must be a multiple of Nk ({nk})")
    check(state.dim() == 4 and tuple(state.shape[1:]) == (nv, dv, dk), _OP,
          f"state must be [BlockNum, Nv={nv}, Dv={dv}, Dk={dk}], got {tuple(state.shape)}")  # fmt: skip
    check(beta is not None and tuple(beta.shape) == (t, nv), _OP, f"beta must be [T={t}, Nv={nv}]")
    check(g is None or tuple(g.shape) == (t, nv), _OP, f"g must be [T={t}, Nv={nv}]")
    check(gk is None, _OP, "gk is not supported (pass None), as in torch_npu")
    check(actual_seq_lengths is not None and actual_seq_lengths.dim() == 1, _OP, "actual_seq_lengths [B] is required")
    lengths = [int(n) for n in actual_seq_lengths.tolist()]
    check(all(n >= 0 for n in lengths) and sum(lengths) == t, _OP,
          f"actual_seq_lengths must sum to T={t}, got {lengths}")  # fmt: skip
    check(ssm_state_indices is not None and tuple(ssm_state_indices.shape) == (t,), _OP, f"ssm_state_indices must be [T={t}]")  # fmt: skip
    slots = ssm_state_indices.tolist()
    check(all(0 <= s < state.shape[0] for s in slots), _OP, f"ssm_state_indices must lie in [0, {state.shape[0]})")
    accepted = [1] * len(lengths) if num_accepted_tokens is None else [int(n) for n in num_accepted_tokens.tolist()]
    check(len(accepted) == len(lengths), _OP, "num_accepted_tokens must have one value per sequence")
    check(all(1 <= a <= max(n, 1) for a, n in zip(accepted, lengths)), _OP,
          "num_accepted_tokens must lie in [1, the sequence's length]")  # fmt: skip
    return lengths, slots, accepted


def _run(query, key, value, state, beta, scale, actual_seq_lengths, ssm_state_indices, num_accepted_tokens, g, gk):
    lengths, slots, accepted = _check(
        query, key, value, state, beta, actual_seq_lengths, ssm_state_indices, num_accepted_tokens, g, gk
    )
    steps = Recurrence(query, key, value, beta, g, scale)

    def store(token, s):  # the state after a token goes to that token's slot
        state[slots[token]] = s

    start = 0
    for length, first in zip(lengths, accepted):
        if length:
            steps.run(state[slots[start + first - 1]].float(), start, length, store)
        start += length
    return steps.out.to(value.dtype)


class Recurrence:
    """The gated delta rule over tokens of [T, ...] inputs in float32 (GQA heads repeated); `out` collects o_t."""

    def __init__(self, query, key, value, beta, g, scale):
        t, nk, dk = query.shape
        nv = value.shape[1]
        self.scale = dk**-0.5 if scale is None else scale
        self.q = query.float().repeat_interleave(nv // nk, dim=1)
        self.k = key.float().repeat_interleave(nv // nk, dim=1)
        self.v, self.b = value.float(), beta.float()
        self.alpha = torch.ones(t, nv, device=value.device) if g is None else g.float().exp()
        self.out = torch.empty(value.shape, dtype=torch.float32, device=value.device)

    def run(self, s, start, length, store=None):
        """From state s [Nv, Dv, Dk] over tokens start..start+length-1 (store(i, s) after each); the last state."""
        for i in range(start, start + length):
            decayed = s * self.alpha[i][:, None, None]
            error = self.v[i] - (decayed @ self.k[i][:, :, None]).squeeze(-1)  # [Nv, Dv]
            s = decayed + self.b[i][:, None, None] * error[:, :, None] * self.k[i][:, None, :]
            self.out[i] = (s @ self.q[i][:, :, None]).squeeze(-1) * self.scale
            if store is not None:
                store(i, s)
        return s


@npu_op(
    f"npu_recurrent_gated_delta_rule({_ARGS.format(state='(a!)')}) -> Tensor",
    fake=lambda query, key, value, state, **kwargs: torch.empty_like(value),
)
def npu_recurrent_gated_delta_rule(
    query, key, value, state, *, beta=None, scale=None, actual_seq_lengths=None, ssm_state_indices=None,
    num_accepted_tokens=None, g=None, gk=None,
):  # fmt: skip
    """Outputs [T, Nv, Dv]; state updated in place."""
    with torch.no_grad():
        return _run(query, key, value, state, beta, scale, actual_seq_lengths, ssm_state_indices,
                    num_accepted_tokens, g, gk)  # fmt: skip


@npu_op(
    f"npu_recurrent_gated_delta_rule_functional({_ARGS.format(state='')}) -> (Tensor, Tensor)",
    fake=lambda query, key, value, state, **kwargs: (torch.empty_like(value), torch.empty_like(state)),
)
def npu_recurrent_gated_delta_rule_functional(
    query, key, value, state, *, beta=None, scale=None, actual_seq_lengths=None, ssm_state_indices=None,
    num_accepted_tokens=None, g=None, gk=None,
):  # fmt: skip
    """(outputs [T, Nv, Dv], the updated state) without changing `state`."""
    new_state = state.clone()
    with torch.no_grad():
        out = _run(query, key, value, new_state, beta, scale, actual_seq_lengths, ssm_state_indices,
                   num_accepted_tokens, g, gk)  # fmt: skip
    return out, new_state
