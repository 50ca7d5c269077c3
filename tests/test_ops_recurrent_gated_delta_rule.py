"""npu_recurrent_gated_delta_rule(_functional) against the rule in its other algebraic form,
S_t = S_{t-1} (alpha_t (I - beta_t k_t k_t^T)) + beta_t v_t k_t^T, computed in float64 per sequence with the
state slots chosen as the operator documents; and its argument checks."""

import torch
from error_cases import raises_operator_error

import torch_npu


def _inputs(lengths, nk=2, nv=4, dk=8, dv=6, blocks=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = sum(lengths)
    q = torch.nn.functional.normalize(torch.randn(t, nk, dk, generator=g), dim=-1).bfloat16()
    k = torch.nn.functional.normalize(torch.randn(t, nk, dk, generator=g), dim=-1).bfloat16()
    v = torch.randn(t, nv, dv, generator=g).bfloat16()
    beta = torch.rand(t, nv, generator=g).bfloat16()
    gate = -torch.rand(t, nv, generator=g)
    state = (torch.randn(blocks or t, nv, dv, dk, generator=g) * 0.1).bfloat16()
    return q, k, v, beta, gate, state


def reference(q, k, v, beta, gate, state, lengths, slots, accepted, scale):
    nv, dv, dk = state.shape[1:]
    rep = nv // q.shape[1]
    q, k = q.double().repeat_interleave(rep, 1), k.double().repeat_interleave(rep, 1)
    state, out = state.clone(), torch.zeros(v.shape, dtype=torch.float64)
    eye = torch.eye(dk, dtype=torch.float64)
    start = 0
    for length, first in zip(lengths, accepted):
        s = state[slots[start + first - 1]].double()
        for i in range(start, start + length):
            a = gate[i].double().exp()[:, None, None]
            kk = k[i][:, :, None] @ k[i][:, None, :]  # [Nv, Dk, Dk]
            s = s @ (a * (eye - beta[i].double()[:, None, None] * kk)) + beta[i].double()[:, None, None] * (
                v[i].double()[:, :, None] @ k[i][:, None, :]
            )
            out[i] = (s @ q[i][:, :, None]).squeeze(-1) * scale
            state[slots[i]] = s.to(state.dtype)
        start += length
    return out.to(v.dtype), state


def _call(fn, q, k, v, beta, gate, state, lengths, slots, accepted, scale):
    return fn(
        q.npu(), k.npu(), v.npu(), state, beta=beta.npu(), scale=scale,
        actual_seq_lengths=torch.tensor(lengths, dtype=torch.int32).npu(),
        ssm_state_indices=torch.tensor(slots, dtype=torch.int32).npu(),
        num_accepted_tokens=None if accepted is None else torch.tensor(accepted, dtype=torch.int32).npu(),
        g=gate.npu(),
    )  # fmt: skip


def test_speculative_sequences_with_their_state_slots():
    lengths, accepted = [3, 1, 4], [2, 1, 4]
    slots = [5, 6, 7, 0, 1, 2, 3, 4]  # one slot per token
    q, k, v, beta, gate, state = _inputs(lengths)
    want_out, want_state = reference(q, k, v, beta, gate, state, lengths, slots, accepted, 0.3)
    npu_state = state.npu()
    out = _call(torch_npu.npu_recurrent_gated_delta_rule, q, k, v, beta, gate, npu_state, lengths, slots, accepted, 0.3)
    torch.testing.assert_close(out.cpu().float(), want_out.float(), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(npu_state.cpu().float(), want_state.float(), atol=2e-2, rtol=2e-2)


def test_one_slot_per_sequence_default_acceptance_and_the_functional_form():
    lengths = [2, 3]
    slots = [0, 0, 1, 1, 1]  # each sequence keeps one state
    q, k, v, beta, gate, state = _inputs(lengths, nk=1, nv=2, blocks=2, seed=1)
    scale = 8**-0.5
    want_out, want_state = reference(q, k, v, beta, gate, state, lengths, slots, [1, 1], scale)
    before = state.npu()
    out, new_state = _call(
        torch_npu.npu_recurrent_gated_delta_rule_functional, q, k, v, beta, gate, before, lengths, slots, None, None
    )
    assert torch.equal(before.cpu(), state)  # the functional form leaves the given state alone
    torch.testing.assert_close(out.cpu().float(), want_out.float(), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(new_state.cpu().float(), want_state.float(), atol=2e-2, rtol=2e-2)


def test_bad_arguments():
    lengths = [2]
    q, k, v, beta, gate, state = (t.npu() for t in _inputs(lengths))
    common = dict(beta=beta, actual_seq_lengths=torch.tensor([2], dtype=torch.int32).npu(), g=gate)
    slots = torch.tensor([0, 1], dtype=torch.int32).npu()
    raises_operator_error(
        lambda: torch_npu.npu_recurrent_gated_delta_rule(q, k, v, state, ssm_state_indices=slots[:1], **common),
        "npu_recurrent_gated_delta_rule: ssm_state_indices must be [T=2]",
    )
    raises_operator_error(
        lambda: torch_npu.npu_recurrent_gated_delta_rule(q, k, v, state, ssm_state_indices=slots + 5, **common),
        "npu_recurrent_gated_delta_rule: ssm_state_indices must lie in [0, 2)",
    )
    raises_operator_error(
        lambda: torch_npu.npu_recurrent_gated_delta_rule(q, k, v, state, ssm_state_indices=slots, gk=gate, **common),
        "npu_recurrent_gated_delta_rule: gk is not supported (pass None), as in torch_npu",
    )
    raises_operator_error(
        lambda: torch_npu.npu_recurrent_gated_delta_rule(
            q, k, v, state, ssm_state_indices=slots, num_accepted_tokens=torch.tensor([3]).npu(), **common
        ),
        "npu_recurrent_gated_delta_rule: num_accepted_tokens must lie in [1, the sequence's length]",
    )


def test_compiled_calls_match_eager_ones_in_place_and_functional():
    q, k, v, beta, gate, state = (t.npu() for t in _inputs([2, 1], seed=2))
    kwargs = dict(
        beta=beta,
        g=gate,
        actual_seq_lengths=torch.tensor([2, 1], dtype=torch.int32).npu(),
        ssm_state_indices=torch.tensor([0, 1, 2], dtype=torch.int32).npu(),
    )

    def in_place(q, k, v, s):
        return torch_npu.npu_recurrent_gated_delta_rule(q, k, v, s, **kwargs)

    def functional(q, k, v, s):
        return torch_npu.npu_recurrent_gated_delta_rule_functional(q, k, v, s, **kwargs)

    torch._dynamo.reset()
    eager_state, compiled_state = state.clone(), state.clone()
    eager = in_place(q, k, v, eager_state)
    compiled = torch.compile(in_place, backend="aot_eager", fullgraph=True)(q, k, v, compiled_state)
    assert torch.equal(eager.cpu(), compiled.cpu()) and torch.equal(eager_state.cpu(), compiled_state.cpu())
    eager_pair = functional(q, k, v, state)
    compiled_pair = torch.compile(functional, backend="aot_eager", fullgraph=True)(q, k, v, state)
    assert all(torch.equal(a.cpu(), b.cpu()) for a, b in zip(eager_pair, compiled_pair))
