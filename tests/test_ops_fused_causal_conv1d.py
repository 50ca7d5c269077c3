"""npu_fused_causal_conv1d(_v2) against torch's depthwise conv1d over each sequence with its cached tail in front
(zeros for a fresh sequence), the cache lines updated to the last C rows, speculative offsets, the Pangu reset,
the residual, skipped pad slots; _v2 writes the output into x."""

import torch
import torch.nn.functional as F

import torch_npu
from tests.error_cases import raises_operator_error

DIM = 16


def conv(padded, weight):
    """sum_k weight[k] * padded[i + k]: depthwise cross-correlation."""
    return F.conv1d(padded.t()[None], weight.t()[:, None, :], groups=DIM)[0].t()


def test_prefill_with_fresh_and_continued_sequences():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(11, DIM, generator=g).to(torch.bfloat16)
    w = torch.randn(3, DIM, generator=g).to(torch.bfloat16)
    states = torch.randn(4, 2, DIM, generator=g).to(torch.bfloat16)
    loc = torch.tensor([0, 5, 11], dtype=torch.int32)
    lines = torch.tensor([3, 1], dtype=torch.int32)
    computed = torch.tensor([0, 7], dtype=torch.int32)
    npu_states = states.npu()
    y = torch_npu.npu_fused_causal_conv1d(
        x.npu(), w.npu(), npu_states, query_start_loc=loc.npu(), cache_indices=lines.npu(),
        num_computed_tokens=computed.npu(), residual_connection=1,
    )  # fmt: skip
    first = torch.cat([torch.zeros(2, DIM), x[:5].float()])
    second = torch.cat([states[1].float(), x[5:].float()])
    want = torch.cat([conv(first, w.float()) + x[:5].float(), conv(second, w.float()) + x[5:].float()])
    torch.testing.assert_close(y.cpu().float(), want.to(torch.bfloat16).float())
    expected_states = states.clone()
    expected_states[3], expected_states[1] = first[-2:].to(torch.bfloat16), second[-2:].to(torch.bfloat16)
    assert torch.equal(npu_states.cpu(), expected_states)


def test_speculative_decode_reads_from_the_accepted_offset_and_v2_writes_x():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, DIM, generator=g).to(torch.float16)  # [batch, seq, dim] decode
    w = torch.randn(3, DIM, generator=g).to(torch.float16)
    states = torch.randn(2, 5, DIM, generator=g).to(torch.float16)  # C = K - 1 + 3
    accepted = torch.tensor([1, 3], dtype=torch.int32)
    npu_x, npu_states = x.npu(), states.npu()
    torch_npu.npu_fused_causal_conv1d_v2(npu_x, w.npu(), npu_states, num_accepted_tokens=accepted.npu())
    for b, offset in enumerate([0, 2]):
        padded = torch.cat([states[b, : offset + 2].float(), x[b].float()])
        want = conv(padded[offset:], w.float())
        torch.testing.assert_close(npu_x[b].cpu().float(), want.half().float())
        assert torch.equal(npu_states[b].cpu(), padded[-5:].half())


def test_pangu_reset_and_pad_slots():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(6, DIM, generator=g).to(torch.bfloat16)
    w = torch.randn(3, DIM, generator=g).to(torch.bfloat16)
    states = torch.randn(3, 2, DIM, generator=g).to(torch.bfloat16)
    loc = torch.tensor([0, 4, 6], dtype=torch.int32)
    y = torch_npu.npu_fused_causal_conv1d(
        x.npu(), w.npu(), states.npu(), query_start_loc=loc.npu(), cache_indices=torch.tensor([0, 7]).int().npu(),
        num_computed_tokens=torch.tensor([1, 5]).int().npu(), conv_mode="pangu", pad_slot_id=7,
    )  # fmt: skip
    want = conv(torch.cat([states[0].float(), x[:4].float()]), w.float())
    want[:1] = 0  # K - 1 - num_computed_tokens = 1 output reset
    torch.testing.assert_close(y[:4].cpu().float(), want.to(torch.bfloat16).float())
    assert not y[4:].cpu().float().any()  # the pad slot's sequence is skipped


def test_refuses_prefix_caching():
    x, w, states = torch.randn(4, DIM).half(), torch.randn(3, DIM).half(), torch.zeros(2, 2, DIM).half()
    raises_operator_error(
        lambda: torch_npu.npu_fused_causal_conv1d(
            x.npu(),
            w.npu(),
            states.npu(),
            query_start_loc=torch.tensor([0, 4]).int().npu(),
            cache_indices=torch.zeros(1, 2).int().npu(),
        ),  # fmt: skip
        "npu_fused_causal_conv1d: automatic prefix caching (a 2-D cache_indices) is not computed by vnpu",
    )


def test_under_compile_the_cache_update_survives_functionalization():
    g = torch.Generator().manual_seed(3)
    x, w = torch.randn(5, DIM, generator=g).half().npu(), torch.randn(3, DIM, generator=g).half().npu()
    states = torch.randn(1, 2, DIM, generator=g).half().npu()
    loc = torch.tensor([0, 5], dtype=torch.int32).npu()
    compiled = torch.compile(lambda x, w, s, starts: torch_npu.npu_fused_causal_conv1d(x, w, s, query_start_loc=starts),
                             backend="aot_eager", fullgraph=True)  # fmt: skip
    eager_states, compiled_states = states.clone(), states.clone()
    want = torch_npu.npu_fused_causal_conv1d(x, w, eager_states, query_start_loc=loc)
    assert torch.equal(compiled(x, w, compiled_states, loc).cpu(), want.cpu())
    assert torch.equal(compiled_states.cpu(), eager_states.cpu()) and not torch.equal(eager_states.cpu(), states.cpu())


def test_initial_state_mode_picks_cache_or_zeros_per_sequence():
    """initial_state_mode per sequence: 1 reads the cached tail, 0 starts from zeros, 2 starts from zeros and zeroes
    the first K - 1 outputs; every line still takes its sequence's last rows."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(12, DIM, generator=g).half()
    w = torch.randn(3, DIM, generator=g).half()
    states = torch.randn(5, 2, DIM, generator=g).half()
    loc, lines = torch.tensor([0, 4, 9, 12], dtype=torch.int32), torch.tensor([2, 0, 4], dtype=torch.int32)
    modes = torch.tensor([1, 0, 2], dtype=torch.int32)
    npu_states = states.npu()
    y = torch_npu.npu_fused_causal_conv1d(
        x.npu(), w.npu(), npu_states, query_start_loc=loc.npu(), cache_indices=lines.npu(),
        initial_state_mode=modes.npu(),
    )  # fmt: skip
    padded = [torch.cat([states[2].float(), x[:4].float()]), torch.cat([torch.zeros(2, DIM), x[4:9].float()])]
    padded.append(torch.cat([torch.zeros(2, DIM), x[9:].float()]))
    want = torch.cat([conv(p, w.float()) for p in padded])
    want[9:11] = 0
    assert torch.equal(y.cpu(), want.half())
    expected_states = states.clone()
    for line, p in zip(lines.tolist(), padded):
        expected_states[line] = p[-2:].half()
    assert torch.equal(npu_states.cpu(), expected_states)
    raises_operator_error(
        lambda: torch_npu.npu_fused_causal_conv1d(
            x.npu(), w.npu(), npu_states, query_start_loc=loc.npu(), initial_state_mode=torch.tensor([1, 3, 0]).npu()
        ),
        "npu_fused_causal_conv1d: initial_state_mode must hold 0, 1 or 2 for each of the 3 sequences, got [1, 3, 0]",
    )
