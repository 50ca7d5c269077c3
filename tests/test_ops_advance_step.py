"""npu_advance_step_flashattn against element-by-element references written here: the decode kernel (one vector
core per query, padding strided by the core count, the block lookup as the card does it) and the speculative
kernel (positions advanced by the accepted drafts, the last accepted token before the first -1)."""

import pytest
import torch
from error_cases import raises_operator_error

import torch_npu

CORES = 48  # vector cores of the default SoC, Ascend910B1


def decode_reference(tokens, sampled, positions, seq_lens, slots, tables, num_seqs, num_queries, block_size):
    tokens, positions, seq_lens, slots = (x.clone() for x in (tokens, positions, seq_lens, slots))
    flat_tables, stride = tables.flatten().tolist(), tables.stride(0)
    for i in range(0, num_seqs - num_queries, CORES):
        tokens[num_queries + i], positions[num_queries + i], slots[num_queries + i] = 0, 0, -1
    for q in range(min(num_queries, CORES)):
        tokens[q] = sampled[q, 0]
        position = int(seq_lens[q])
        seq_lens[q] = position + 1
        positions[q] = position
        block = flat_tables[position // block_size]
        slots[q] = (block + stride * q) * block_size + position % block_size
    return tokens, positions, seq_lens, slots


def speculative_reference(tokens, sampled, positions, seq_lens, slots, tables, block_size, spec, accepted):
    num_seqs, width = sampled.shape
    tokens, positions, seq_lens, slots = (x.clone().view(num_seqs, width) for x in (tokens, positions, seq_lens, slots))
    for i in range(num_seqs):
        row = sampled[i].tolist()
        stop = row.index(-1) if -1 in row else width
        tokens[i, 0] = row[stop - 1] if stop > 0 else -1
        tokens[i, 1:] = spec[i]
        for j in range(width):
            position = int(positions[i, j]) + int(accepted[i]) + 1
            positions[i, j], seq_lens[i, j] = position, position + 1
            slots[i, j] = int(tables[i, position // block_size]) * block_size + position % block_size
    return tuple(x.reshape(-1) for x in (tokens, positions, seq_lens, slots))


def decode_inputs(seed, num_seqs, num_queries, block_size):
    g = torch.Generator().manual_seed(seed)
    seq_lens = torch.randint(5, 50, (num_seqs,), generator=g)
    # the kernel reads the *flattened* table at position // block_size: one row covers every position < 50
    tables = torch.randint(5, 50, (num_seqs, 50 // block_size + 1), generator=g)
    return (
        torch.randint(5, 50, (num_seqs,), generator=g),
        torch.randint(5, 50, (num_queries, 1), generator=g),
        torch.randint(5, 50, (num_seqs,), generator=g),
        seq_lens,
        torch.randint(5, 50, (num_seqs,), generator=g),
        tables,
    )


def run_on_npu(inputs, *args, **kwargs):
    on_npu = [x.npu() for x in inputs]
    kwargs = {k: v.npu() for k, v in kwargs.items()}
    assert torch_npu.npu_advance_step_flashattn(*on_npu, *args, **kwargs) is None
    return tuple(on_npu[i].cpu() for i in (0, 2, 3, 4))


@pytest.mark.parametrize("i", range(7))
def test_decode_follows_the_kernel(i):
    """torch_npu's own case sizes: num_seqs 2i + 2, num_queries i + 1, block_size i + 1."""
    num_seqs, num_queries, block_size = 2 * i + 2, i + 1, i + 1
    inputs = decode_inputs(i, num_seqs, num_queries, block_size)
    got = run_on_npu(inputs, num_seqs, num_queries, block_size)
    want = decode_reference(*inputs, num_seqs, num_queries, block_size)
    for g, w in zip(got, want):
        assert torch.equal(g, w)


def test_decode_pads_every_core_count_th_entry_and_advances_at_most_one_query_per_core():
    num_seqs, num_queries, block_size = 150, 50, 4
    inputs = decode_inputs(11, num_seqs, num_queries, block_size)
    tokens, positions, seq_lens, slots = run_on_npu(inputs, num_seqs, num_queries, block_size)
    want = decode_reference(*inputs, num_seqs, num_queries, block_size)
    assert all(torch.equal(g, w) for g, w in zip((tokens, positions, seq_lens, slots), want))
    assert torch.equal(seq_lens[CORES:], inputs[3][CORES:])  # queries 48 and 49 keep their state, as on the card
    assert slots[num_queries].item() == -1 and slots[num_queries + CORES].item() == -1
    assert torch.equal(slots[num_queries + 1 : num_queries + CORES], inputs[4][num_queries + 1 : num_queries + CORES])


@pytest.mark.parametrize("num_seqs", [2, 6, 14])
def test_speculative_decoding_follows_the_kernel(num_seqs):
    spec_num, block_size = 3, 8
    width = spec_num + 1
    g = torch.Generator().manual_seed(num_seqs)
    sampled = torch.randint(5, 50, (num_seqs, width), generator=g)
    sampled[0, 2:] = -1  # two drafts rejected
    sampled[-1, :] = -1  # nothing accepted
    inputs = (
        torch.randint(5, 50, (num_seqs * width,), generator=g),
        sampled,
        torch.randint(5, 50, (num_seqs * width,), generator=g),
        torch.randint(5, 50, (num_seqs * width,), generator=g),
        torch.randint(5, 50, (num_seqs * width,), generator=g),
        torch.randint(5, 50, (num_seqs, 100), generator=g),
    )
    spec = torch.randint(5, 50, (num_seqs, spec_num), generator=g)
    accepted = torch.randint(0, width, (num_seqs,), generator=g)
    got = run_on_npu(inputs, num_seqs, num_seqs, block_size, spec_token=spec, accepted_num=accepted)
    want = speculative_reference(*inputs, block_size, spec, accepted)
    for g_, w in zip(got, want):
        assert torch.equal(g_, w)
    assert got[0][0].item() == sampled[0, 1].item() and got[0][(num_seqs - 1) * width].item() == -1


def test_under_torch_compile_the_state_is_updated_in_place():
    inputs = decode_inputs(3, 6, 3, 2)
    want = decode_reference(*inputs, 6, 3, 2)
    on_npu = [x.npu() for x in inputs]

    @torch.compile(backend="aot_eager", fullgraph=True)
    def step(*tensors):
        torch_npu.npu_advance_step_flashattn(*tensors, 6, 3, 2)

    step(*on_npu)
    for got, w in zip((on_npu[0], on_npu[2], on_npu[3], on_npu[4]), want):
        assert torch.equal(got.cpu(), w)


def _decode_args(**change):
    inputs = decode_inputs(5, 4, 2, 4)
    names = ("input_tokens", "sampled_token_ids", "input_positions", "seq_lens", "slot_mapping", "block_tables")
    args = dict(zip(names, inputs))
    args.update(num_seqs=4, num_queries=2, block_size=4)
    args.update(change)
    return {k: v.npu() if isinstance(v, torch.Tensor) else v for k, v in args.items()}


BAD_INPUTS = [
    ({"num_queries": 4}, "num_seqs 4 should not be smaller or equal to num_queries 4 without spec_token"),
    ({"block_size": 0}, "block_size must be a positive integer, got 0"),
    ({"seq_lens": torch.ones(4, dtype=torch.int32)}, "seq_lens must be int64, got torch.int32"),
    ({"sampled_token_ids": torch.ones(2, dtype=torch.long)}, r"sampled_token_ids must be \[num_queries=2, 1\]"),
    ({"block_tables": torch.ones(3, 2, dtype=torch.long)}, r"block_tables must be \[num_seqs=4, blocks\]"),
    ({"seq_lens": torch.full((4,), 999, dtype=torch.long)}, "decode: a block index falls outside block_tables"),
    (
        {"spec_token": torch.ones(4, 2, dtype=torch.long), "accepted_num": torch.ones(4, dtype=torch.long)},
        "with spec_token, num_queries must equal num_seqs, got 2 and 4",
    ),
    (
        {"num_queries": 4, "spec_token": torch.ones(4, 2, dtype=torch.long), "accepted_num": torch.ones(4).long()},
        r"input_tokens must be \[num_seqs \* \(1 \+ spec_num\)\] = \[12\], got \(4,\)",
    ),
]


@pytest.mark.parametrize("change, message", BAD_INPUTS)
def test_bad_inputs_are_refused_before_anything_is_written(change, message):
    args = _decode_args(**change)
    before = {k: v.cpu().clone() for k, v in args.items() if isinstance(v, torch.Tensor)}
    with pytest.raises(RuntimeError, match=f"^npu_advance_step_flashattn: {message}"):
        torch_npu.npu_advance_step_flashattn(**args)
    for name, value in before.items():
        assert torch.equal(args[name].cpu(), value), name


L = torch.long


def n(*shape, **kwargs):
    return torch.zeros(*shape, **kwargs).npu()


EXACT_ERRORS = [
    (
        lambda: torch_npu.npu_advance_step_flashattn(
            n(4, dtype=L), n(2, 1, dtype=L), n(4, dtype=L), n(4, dtype=L), n(4, dtype=L), n(4, 2, dtype=L), 4, 0, 4
        ),
        "npu_advance_step_flashattn: num_queries must be a positive integer, got 0",
    ),
    (
        lambda: torch_npu.npu_advance_step_flashattn(
            n(3, dtype=L), n(2, 1, dtype=L), n(4, dtype=L), n(4, dtype=L), n(4, dtype=L), n(4, 2, dtype=L), 4, 2, 4
        ),
        "npu_advance_step_flashattn: input_tokens must hold num_seqs=4 values, got (3,)",
    ),
    (
        lambda: torch_npu.npu_advance_step_flashattn(
            n(4, dtype=L), n(2, 1, dtype=L), n(4, dtype=L), n(4, dtype=L), n(5, dtype=L), n(4, 2, dtype=L), 4, 2, 4
        ),
        "npu_advance_step_flashattn: slot_mapping must hold num_seqs=4 values, got (5,)",
    ),
    (
        lambda: torch_npu.npu_advance_step_flashattn(
            n(8, dtype=L)[::2], n(2, 1, dtype=L), n(4, dtype=L), n(4, dtype=L), n(4, dtype=L), n(4, 2, dtype=L), 4, 2, 4
        ),
        "npu_advance_step_flashattn: input_tokens must be contiguous (it is updated in place)",
    ),
    (
        lambda: torch_npu.npu_advance_step_flashattn(
            n(12, dtype=L),
            n(4, 3, dtype=L),
            n(12, dtype=L),
            n(12, dtype=L),
            n(12, dtype=L),
            n(4, 2, dtype=L),
            4,
            4,
            4,
            spec_token=n(3, 2, dtype=L),
            accepted_num=n(4, dtype=L),
        ),
        "npu_advance_step_flashattn: spec_token must be [num_seqs=4, spec_num], got (3, 2)",
    ),
    (
        lambda: torch_npu.npu_advance_step_flashattn(
            n(12, dtype=L),
            n(4, 3, dtype=L),
            n(12, dtype=L),
            n(12, dtype=L),
            n(12, dtype=L),
            n(4, 2, dtype=L),
            4,
            4,
            4,
            spec_token=n(4, 2, dtype=L),
            accepted_num=n(3, dtype=L),
        ),
        "npu_advance_step_flashattn: accepted_num must be [num_seqs=4], got (3,)",
    ),
    (
        lambda: torch_npu.npu_advance_step_flashattn(
            n(12, dtype=L),
            n(4, 2, dtype=L),
            n(12, dtype=L),
            n(12, dtype=L),
            n(12, dtype=L),
            n(4, 2, dtype=L),
            4,
            4,
            4,
            spec_token=n(4, 2, dtype=L),
            accepted_num=n(4, dtype=L),
        ),
        "npu_advance_step_flashattn: sampled_token_ids must be [num_seqs, 1 + spec_num] = [4, 3], got (4, 2)",
    ),
    (
        lambda: torch_npu.npu_advance_step_flashattn(
            n(12, dtype=L),
            n(4, 3, dtype=L),
            n(8, dtype=L),
            n(12, dtype=L),
            n(12, dtype=L),
            n(4, 2, dtype=L),
            4,
            4,
            4,
            spec_token=n(4, 2, dtype=L),
            accepted_num=n(4, dtype=L),
        ),
        "npu_advance_step_flashattn: input_positions must be shaped like input_tokens (12,)",
    ),
    (
        lambda: torch_npu.npu_advance_step_flashattn(
            n(12, dtype=L),
            n(4, 3, dtype=L),
            torch.full((12,), 99, dtype=L).npu(),
            n(12, dtype=L),
            n(12, dtype=L),
            n(4, 2, dtype=L),
            4,
            4,
            4,
            spec_token=n(4, 2, dtype=L),
            accepted_num=n(4, dtype=L),
        ),
        "npu_advance_step_flashattn: speculative: a block index falls outside block_tables of (4, 2) (the card would read past it)",
    ),
    (
        lambda: torch_npu.npu_advance_step_flashattn(
            n(12, dtype=L),
            n(4, 3, dtype=L),
            n(12, dtype=L),
            n(12, dtype=L),
            n(12, dtype=L),
            n(4, 2, dtype=L),
            4,
            4,
            4,
            spec_token=n(4, 2, dtype=torch.int32),
            accepted_num=n(4, dtype=L),
        ),
        "npu_advance_step_flashattn: spec_token must be int64, got torch.int32",
    ),
]


@pytest.mark.parametrize("call, message", EXACT_ERRORS)
def test_bad_inputs_give_torch_npus_error_text(call, message):
    raises_operator_error(call, message)
