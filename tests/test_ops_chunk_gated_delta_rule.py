"""npu_chunk_gated_delta_rule against the float64 reference of the gated delta rule (one state per sequence,
the final one returned), without an initial state, the fake kernel under compile, and its argument checks."""

import torch
from error_cases import raises_operator_error
from test_ops_recurrent_gated_delta_rule import _inputs, reference

import torch_npu


def _run(q, k, v, beta, gate, initial, lengths, scale):
    return torch_npu.npu_chunk_gated_delta_rule(
        q.npu(), k.npu(), v.npu(), beta=beta.npu(), initial_state=None if initial is None else initial.npu(),
        actual_seq_lengths=torch.tensor(lengths, dtype=torch.int32).npu(), scale=scale, g=gate.npu(),
    )  # fmt: skip


def test_sequences_from_their_initial_states_to_their_final_states():
    lengths = [5, 2, 9]
    q, k, v, beta, gate, state = _inputs(lengths, blocks=3, seed=3)
    slots = [b for b, n in enumerate(lengths) for _ in range(n)]  # the reference keeps sequence b in slot b
    want_out, want_state = reference(q, k, v, beta, gate, state, lengths, slots, [1, 1, 1], 0.25)
    out, final = _run(q, k, v, beta, gate, state, lengths, 0.25)
    torch.testing.assert_close(out.cpu().float(), want_out.float(), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(final.cpu().float(), want_state.float(), atol=2e-2, rtol=2e-2)


def test_without_an_initial_state_the_state_starts_at_zero():
    lengths = [3, 4]
    q, k, v, beta, gate, _ = _inputs(lengths, blocks=2, seed=4)
    zeros = torch.zeros(2, 4, 6, 8).bfloat16()
    slots = [0, 0, 0, 1, 1, 1, 1]
    want_out, want_state = reference(q, k, v, beta, gate, zeros, lengths, slots, [1, 1], 8**-0.5)
    out, final = _run(q, k, v, beta, gate, None, lengths, None)
    assert final.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu().float(), want_out.float(), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(final.cpu().float(), want_state.float(), atol=2e-2, rtol=2e-2)


def test_compiled_call_matches_the_eager_one():
    lengths = [2, 3]
    q, k, v, beta, gate, state = (t.npu() for t in _inputs(lengths, blocks=2, seed=5))
    asl = torch.tensor(lengths, dtype=torch.int32).npu()

    def call(q, k, v, s):
        return torch_npu.npu_chunk_gated_delta_rule(q, k, v, beta=beta, initial_state=s, actual_seq_lengths=asl, g=gate)

    torch._dynamo.reset()
    eager, compiled = call(q, k, v, state), torch.compile(call, backend="aot_eager", fullgraph=True)(q, k, v, state)
    assert all(torch.equal(a.cpu(), b.cpu()) for a, b in zip(eager, compiled))


def test_bad_arguments():
    lengths = [2, 2]
    q, k, v, beta, gate, state = (t.npu() for t in _inputs(lengths, blocks=2))
    raises_operator_error(
        lambda: torch_npu.npu_chunk_gated_delta_rule(
            q, k, v, beta=beta, initial_state=state[:1], actual_seq_lengths=torch.tensor([2, 2]).npu(), g=gate
        ),
        "npu_chunk_gated_delta_rule: initial_state must be [2, 4, 6, 8], got [1, 4, 6, 8]",
    )
    raises_operator_error(
        lambda: torch_npu.npu_chunk_gated_delta_rule(q, k, v, beta=beta, actual_seq_lengths=torch.tensor([3]).npu()),
        "npu_chunk_gated_delta_rule: actual_seq_lengths must sum to T=4, got [3]",
    )
