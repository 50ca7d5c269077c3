"""torch_npu.atb.npu_multi_head_latent_attention (op-plugin's ATB MLA over paged caches) against a reference
written here one sequence and one head at a time: decode, ring (with the log-sum-exp), speculative decoding, the
FRACTAL_NZ caches, the out forms, and its argument errors."""

import pytest
import torch
from error_cases import raises_exactly, raises_operator_error

import torch_npu

HEADS, BLOCKS, BLOCK_SIZE, LATENT, ROPE = 4, 6, 16, 32, 16


def _inputs(tokens):
    g = torch.Generator().manual_seed(8)
    q_nope, q_rope = torch.randn(tokens, HEADS, LATENT, generator=g).half(), torch.randn(tokens, HEADS, ROPE, generator=g).half()  # fmt: skip
    ctkv = torch.randn(BLOCKS, BLOCK_SIZE, 1, LATENT, generator=g).half()
    k_rope = torch.randn(BLOCKS, BLOCK_SIZE, 1, ROPE, generator=g).half()
    table = torch.tensor([[3, 1], [0, 5], [2, 4]], dtype=torch.int32)
    return q_nope, q_rope, ctkv, k_rope, table


def _reference(q_nope, q_rope, ctkv, k_rope, table, contexts, new_tokens, causal, scale):
    """[tokens, heads, LATENT] and the log-sum-exp [tokens, heads, 1]; sequence b's query tokens are the last
    new_tokens[b] positions of its context."""
    out, lse, token = torch.zeros(q_nope.shape, dtype=torch.float16), torch.zeros(*q_nope.shape[:2], 1), 0
    for b, (context, new) in enumerate(zip(contexts, new_tokens)):
        rows = [(int(table[b, j // BLOCK_SIZE]), j % BLOCK_SIZE) for j in range(context)]
        keys = torch.stack([torch.cat([ctkv[r][0], k_rope[r][0]]) for r in rows]).float()
        values = torch.stack([ctkv[r][0] for r in rows]).float()
        for i in range(new):
            position = context - new + i
            for h in range(HEADS):
                scores = keys @ torch.cat([q_nope[token, h], q_rope[token, h]]).float() * scale
                if causal:
                    scores[position + 1 :] = float("-inf")
                p = torch.softmax(scores, dim=0).half().float()
                out[token, h] = (p @ values).half()
                lse[token, h] = torch.logsumexp(scores, dim=0)
            token += 1
    return out, lse


def test_decode_attends_with_the_latent_and_rotary_halves_and_ring_gives_the_log_sum_exp():
    q_nope, q_rope, ctkv, k_rope, table = _inputs(3)
    args = (q_nope.npu(), q_rope.npu(), ctkv.npu(), k_rope.npu(), table.npu(), [5, 20, 1], HEADS, 0.2, 1)
    want, want_lse = _reference(q_nope, q_rope, ctkv, k_rope, table, [5, 20, 1], [1, 1, 1], False, 0.2)
    out = torch_npu.atb.npu_multi_head_latent_attention(*args)
    torch.testing.assert_close(out.cpu(), want, atol=2e-3, rtol=2e-3)
    ring, lse = torch_npu.atb.npu_multi_head_latent_attention(*args, True, calc_type="calc_type_ring")
    torch.testing.assert_close(ring.cpu(), want, atol=2e-3, rtol=2e-3)
    torch.testing.assert_close(lse.cpu().float(), want_lse, atol=1e-2, rtol=1e-3)
    output, written_lse = torch.empty_like(out), torch.empty(3, HEADS, 1, dtype=torch.float16, device="npu")
    returned = torch_npu.atb.npu_multi_head_latent_attention(
        *args, True, calc_type="calc_type_ring", output=output, lse=written_lse
    )
    assert returned[0] is output and returned[1] is written_lse and torch.equal(written_lse.cpu(), lse.cpu())
    assert torch_npu.atb.npu_multi_head_latent_attention(*args, output=output) is output
    assert torch.equal(output.cpu(), out.cpu())


@pytest.mark.parametrize("mask_type", ["undefined", "mask_type_spec"])
def test_speculative_decoding_attends_to_the_context_causally_under_the_spec_mask(mask_type):
    q_nope, q_rope, ctkv, k_rope, table = _inputs(5)
    out = torch_npu.atb.npu_multi_head_latent_attention(
        q_nope.npu(), q_rope.npu(), ctkv.npu(), k_rope.npu(), table.npu(), [9, 30, 4], HEADS, 0.2, 1,
        qseqlen=[2, 1, 2], calc_type="calc_type_spec", mask_type=mask_type,
    )  # fmt: skip
    causal = mask_type == "mask_type_spec"
    want, _ = _reference(q_nope, q_rope, ctkv, k_rope, table, [9, 30, 4], [2, 1, 2], causal, 0.2)
    torch.testing.assert_close(out.cpu(), want, atol=2e-3, rtol=2e-3)


def _fractal_nz(cache):
    blocks, block_size = cache.shape[:2]
    return torch_npu.npu_format_cast(cache.reshape(blocks, block_size, -1, 16).permute(0, 2, 1, 3).contiguous().npu(), 29)  # fmt: skip


def test_fractal_nz_caches_give_the_same_attention():
    q_nope, q_rope, ctkv, k_rope, table = _inputs(3)
    common = (q_nope.npu(), q_rope.npu())
    nd = torch_npu.atb.npu_multi_head_latent_attention(*common, ctkv.npu(), k_rope.npu(), table.npu(), [5, 20, 1], HEADS, 0.2, 1)  # fmt: skip
    nz = torch_npu.atb.npu_multi_head_latent_attention(
        *common, _fractal_nz(ctkv), _fractal_nz(k_rope), table.npu(), [5, 20, 1], HEADS, 0.2, 1, cache_mode="nzcache"
    )
    assert torch.equal(nz.cpu(), nd.cpu())


def test_bad_arguments_name_what_is_wrong():
    q_nope, q_rope, ctkv, k_rope, table = (t.npu() for t in _inputs(3))
    args = (q_nope, q_rope, ctkv, k_rope, table, [5, 20, 1], HEADS, 0.2, 1)
    op = "npu_multi_head_latent_attention"
    cases = [
        (dict(cache_mode="int8"), f"{op}: Unsupported cache_mode value: 'int8'"),
        (dict(calc_type="calc_type_prefill"), f"{op}: Unsupported calc_type value: 'calc_type_prefill'"),
        (
            dict(cache_mode="int8_nzcache"),
            f"{op}: cache_mode 'int8_nzcache' (int8 latents with per-head descales) is not modelled by vnpu",
        ),  # fmt: skip
        (dict(mask_type="mask_type_free"), f"{op}: mask_type 'mask_type_free' is not modelled by vnpu"),
        (dict(calc_type="calc_type_spec"), f"{op}: calc_type 'calc_type_spec' needs qseqlen"),
    ]
    for options, message in cases:
        raises_operator_error(lambda options=options: torch_npu.atb.npu_multi_head_latent_attention(*args, **options), message)  # fmt: skip
    raises_operator_error(
        lambda: torch_npu.atb.npu_multi_head_latent_attention(*args[:5], [5, 20], *args[6:]),
        f"{op}: 2 context_lens for 3 query tokens",
    )
    raises_operator_error(
        lambda: torch_npu.atb.npu_multi_head_latent_attention(q_nope[0], *args[1:]),
        f"{op}: q_nope must be [tokens, {HEADS}, head_size]",
    )


def test_fake_shapes_and_a_full_graph_compile_through_the_operator():
    q_nope, q_rope, ctkv, k_rope, table = (t.npu() for t in _inputs(3))

    def attend(q_nope, q_rope, ctkv, k_rope, table):
        return torch_npu.atb.npu_multi_head_latent_attention(q_nope, q_rope, ctkv, k_rope, table, [5, 20, 1], HEADS, 0.2, 1)  # fmt: skip

    eager = attend(q_nope, q_rope, ctkv, k_rope, table)
    mode = torch._subclasses.fake_tensor.FakeTensorMode()
    with mode:
        fake = attend(*(mode.from_tensor(t) for t in (q_nope, q_rope, ctkv, k_rope, table)))
    assert (fake.shape, fake.dtype) == (eager.shape, eager.dtype)
    torch._dynamo.reset()
    compiled = torch.compile(attend, backend="aot_eager", fullgraph=True)
    assert torch.equal(compiled(q_nope, q_rope, ctkv, k_rope, table).cpu(), eager.cpu())


def _ring_inputs(tokens, seed):
    g = torch.Generator().manual_seed(seed)
    shapes = ((tokens, HEADS, 16), (tokens, HEADS, 8), (tokens, 2, 16), (tokens, 2, 8), (tokens, 2, 12))
    return [torch.randn(*shape, generator=g).bfloat16() for shape in shapes]


def test_ring_mla_merged_over_two_chunks_equals_attention_over_the_whole_sequence():
    """Step 1 attends causally to the query's own chunk (calc_type_first_ring), step 2 to the earlier chunk,
    merged through the log-sum-exp (calc_type_default): together, attention over both chunks."""
    q_nope, q_rope, k_own, r_own, v_own = _ring_inputs(6, 10)
    _, _, k_early, r_early, v_early = _ring_inputs(5, 11)
    mask = torch.zeros(512, 512, dtype=torch.bfloat16, device="npu")
    npu = lambda *ts: [t.npu() for t in ts]  # noqa: E731
    first, lse = torch_npu.atb.npu_ring_mla(
        *npu(q_nope, q_rope, k_own, r_own, v_own), mask, torch.tensor([6]), HEADS, 2, qk_scale=0.25, mask_type="mask_type_triu"
    )  # fmt: skip
    output, softmax_lse = torch.empty_like(first), torch.empty_like(lse)
    torch_npu.atb.npu_ring_mla(
        *npu(q_nope, q_rope, k_early, r_early, v_early), mask, torch.tensor([[6], [5]]), HEADS, 2, pre_out=first,
        prev_lse=lse, qk_scale=0.25, calc_type="calc_type_default", output=output, softmax_lse=softmax_lse,
    )  # fmt: skip
    q = torch.cat([q_nope, q_rope], -1).float()
    k = torch.cat([torch.cat([k_early, r_early], -1), torch.cat([k_own, r_own], -1)]).float()
    v = torch.cat([v_early, v_own]).float()
    want, want_lse = torch.zeros(6, HEADS, 12), torch.zeros(HEADS, 6)
    for i in range(6):
        for h in range(HEADS):
            scores = k[: 5 + i + 1, h // 2] @ q[i, h] * 0.25  # the early chunk and the own chunk up to i
            want[i, h] = torch.softmax(scores, 0) @ v[: 5 + i + 1, h // 2]
            want_lse[h, i] = torch.logsumexp(scores, 0)
    torch.testing.assert_close(output.cpu().float(), want, atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(softmax_lse.cpu(), want_lse, atol=1e-4, rtol=1e-4)


def test_ring_mla_refuses_what_op_plugin_refuses():
    q_nope, q_rope, k, r, v = (t.npu() for t in _ring_inputs(4, 12))
    mask = torch.zeros(512, 512, dtype=torch.bfloat16, device="npu")
    raises_exactly(
        lambda: torch_npu.atb.npu_ring_mla(q_nope, q_rope, k, r, v, mask, torch.tensor([4]).npu(), HEADS, 2),
        RuntimeError,
        "Expected CPU tensor, please check whether the input seqlen tensor device is correct.",
    )
    for seqlen, options, message in (
        (
            [4],
            {"calc_type": "calc_type_default"},
            "calc_type 'calc_type_default' merges into pre_out and prev_lse, which are required",
        ),  # fmt: skip
        ([4], {"mask_type": "mask_type_free"}, "Unsupported mask_type value: 'mask_type_free'"),
        ([4], {"input_layout": "type_bnsd"}, "Unsupported input_layout value: 'type_bnsd'"),
        ([3], {}, "seqlen gives 3 query tokens, q_nope has 4"),
    ):
        raises_operator_error(
            lambda seqlen=seqlen, options=options: torch_npu.atb.npu_ring_mla(
                q_nope, q_rope, k, r, v, mask, torch.tensor(seqlen), HEADS, 2, **options
            ),
            f"npu_ring_mla: {message}",
        )
