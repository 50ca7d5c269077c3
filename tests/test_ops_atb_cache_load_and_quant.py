"""op-plugin's ATB paged-cache read (torch_npu.atb.npu_paged_cache_load), quantisation (_npu_quant_rms_norm,
_npu_quantize_per_tensor) and float32 accumulation (_npu_matmul_add_fp32) against references written here."""

import pytest
import torch
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu

BLOCKS, BLOCK_SIZE, HEADS = 12, 4, 2


def _load_reference(cache, block_table, lengths, starts=None):
    """The rows of each sequence, one token at a time: token i of sequence b is row i % block_size of block
    block_table[b, starts[b] // block_size + i // block_size]."""
    rows = []
    for b, length in enumerate(lengths):
        first = 0 if starts is None else int(starts[b]) // BLOCK_SIZE
        for i in range(int(length)):
            rows.append(cache[int(block_table[b, first + i // BLOCK_SIZE]), i % BLOCK_SIZE])
    return torch.stack(rows)


def _caches(dtype=torch.float16):
    key_cache = torch.randn(BLOCKS, BLOCK_SIZE, HEADS, 8).to(dtype)
    value_cache = torch.randn(BLOCKS, BLOCK_SIZE, HEADS, 6).to(dtype)
    block_table = torch.stack([torch.randperm(BLOCKS) for _ in range(3)]).int()
    return key_cache, value_cache, block_table


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int8])
def test_paged_cache_load_gathers_each_sequence_s_tokens_in_order(dtype):
    key_cache, value_cache, block_table = _caches(dtype)
    lengths = torch.tensor([5, 0, 9], dtype=torch.int32)
    key, value = torch_npu.atb.npu_paged_cache_load(
        key_cache.npu(), value_cache.npu(), block_table.npu(), lengths.npu()
    )
    assert torch.equal(key.cpu(), _load_reference(key_cache, block_table, lengths))
    assert torch.equal(value.cpu(), _load_reference(value_cache, block_table, lengths))


def test_cumulative_lengths_and_seq_starts_select_the_same_tokens_as_the_reference():
    key_cache, value_cache, block_table = _caches()
    lengths, starts = torch.tensor([3, 6, 2], dtype=torch.int32), torch.tensor([5, 0, 9], dtype=torch.int32)
    key, value = torch_npu.atb.npu_paged_cache_load(
        key_cache.npu(), value_cache.npu(), block_table.npu(), lengths.cumsum(0).int().npu(),
        seq_starts=starts.npu(), cumsum=True,
    )  # fmt: skip
    assert torch.equal(key.cpu(), _load_reference(key_cache, block_table, lengths, starts))
    assert torch.equal(value.cpu(), _load_reference(value_cache, block_table, lengths, starts))


def _fractal_nz(cache):
    """An ND cache [blocks, block_size, heads, head_size] as the card's FRACTAL_NZ cache of the same tokens:
    [blocks, heads * head_size / 16, block_size, 16]."""
    blocks, block_size = cache.shape[:2]
    nz = cache.reshape(blocks, block_size, -1, 16).permute(0, 2, 1, 3).contiguous()
    return torch_npu.npu_format_cast(nz.npu(), 29)


def test_the_out_form_reads_fractal_nz_caches_and_replays_in_an_npu_graph():
    key_cache, value_cache = torch.randn(BLOCKS, BLOCK_SIZE, HEADS, 8).half(), torch.randn(BLOCKS, BLOCK_SIZE, HEADS, 16).half()  # fmt: skip
    block_table = torch.stack([torch.randperm(BLOCKS) for _ in range(3)]).int()
    lengths = torch.tensor([4, 7, 1], dtype=torch.int32, device="npu")
    key, value = (torch.empty(12, HEADS, c.shape[-1], dtype=torch.float16, device="npu") for c in (key_cache, value_cache))  # fmt: skip
    graph = torch.npu.NPUGraph()
    with torch.npu.graph(graph):
        torch_npu.atb.npu_paged_cache_load(
            _fractal_nz(key_cache), _fractal_nz(value_cache), block_table.npu(), lengths, key=key, value=value
        )
    lengths.copy_(torch.tensor([2, 2, 8], dtype=torch.int32))
    graph.replay()
    for got, cache in ((key, key_cache), (value, value_cache)):
        assert torch.equal(got.cpu(), _load_reference(cache, block_table, [2, 2, 8]))


def _quant_rms_norm_reference(x, gamma, beta, scale, offset, eps):
    out = torch.empty(x.shape, dtype=torch.int8)
    for index in range(x.shape[0]):
        row = x[index].float()
        y = row / torch.sqrt((row * row).mean() + eps) * gamma.flatten().float() + beta.flatten().float()
        out[index] = torch.round(y / scale.float() + offset.float()).clamp(-128, 127).to(torch.int8)
    return out


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_quant_rms_norm_writes_the_int8_of_the_float32_norm(dtype):
    x, gamma, beta = torch.randn(6, 32).to(dtype) * 3, torch.randn(1, 32).to(dtype), torch.randn(1, 32).to(dtype)
    scale, offset = torch.tensor([0.05], dtype=dtype), torch.tensor([3], dtype=torch.int8)

    def quant_rms_norm(x, gamma, beta, scale, offset):
        output = torch.zeros(x.shape, dtype=torch.int8, device=x.device)
        torch_npu._npu_quant_rms_norm(x, gamma, beta, scale, offset, output, eps=1e-5)
        return output

    check_op(
        quant_rms_norm,
        (x, gamma, beta, scale, offset),
        lambda *a: _quant_rms_norm_reference(*a, eps=1e-5),
        atol=0,
        rtol=0,
        fake=False,
    )


def test_quantize_per_tensor_rounds_the_quotient_in_x_s_dtype_and_adds_the_zero_point():
    x, scale = torch.rand(2, 8, 8).half() * 40, torch.rand(8, 8).half() + 0.05
    zero_point = torch.randint(-10, 10, (8, 8), dtype=torch.int8)
    want = [[int(min(max(torch.round(x[i, r, c] / scale[r, c]) + zero_point[r, c], -128), 127))
             for c in range(8)] for i in range(2) for r in range(8)]  # fmt: skip
    y = torch.zeros(2, 8, 8, dtype=torch.int8, device="npu")
    torch_npu._npu_quantize_per_tensor(x.npu(), scale.npu(), zero_point.npu(), y)
    assert y.cpu().reshape(-1, 8).tolist() == want
    torch_npu._npu_quantize_per_tensor(x.npu(), scale.npu(), torch.empty(0, dtype=torch.int8, device="npu"), y)
    assert torch.equal(y.cpu(), torch.round(x / scale).float().clamp(-128, 127).to(torch.int8))


def test_matmul_add_fp32_accumulates_x_transposed_times_weight_into_c():
    x, weight, c = torch.randn(16, 5).half(), torch.randn(16, 7).half(), torch.randn(5, 7)

    def matmul_add(x, weight, c):
        c = c.clone()
        torch_npu._npu_matmul_add_fp32(x, weight, c)
        return c

    check_op(matmul_add, (x, weight, c), lambda x, w, c: c + x.float().t() @ w.float(), atol=1e-4, rtol=1e-5)


def test_bad_arguments_name_what_is_wrong():
    key_cache, value_cache, block_table = (t.npu() for t in _caches())
    nz_key = torch_npu.npu_format_cast(torch.zeros(BLOCKS, 1, BLOCK_SIZE, 16, dtype=torch.float16).npu(), 29)
    lengths = torch.tensor([1, 1, 1], dtype=torch.int32, device="npu")
    x = torch.zeros(2, 8, dtype=torch.float16, device="npu")
    cases = [
        (
            lambda: torch_npu.atb.npu_paged_cache_load(key_cache[0], value_cache, block_table, lengths),
            "npu_paged_cache_load: key_cache must be 4-D, got 3-D",
        ),
        (
            lambda: torch_npu.atb.npu_paged_cache_load(nz_key, value_cache, block_table, lengths),
            "npu_paged_cache_load: FRACTAL_NZ caches need the out form (key=, value=)",
        ),
        (
            lambda: torch_npu._npu_quant_rms_norm(x, x[0], x[0], x[0, :1], x[0, :1].char(), torch.zeros_like(x)),
            "_npu_quant_rms_norm: output must be int8, got torch.float16",
        ),
        (
            lambda: torch_npu._npu_quant_rms_norm(x, x[0, :4], x[0], x[0, :1], x[0, :1].char(), x.char()),
            "_npu_quant_rms_norm: gamma must hold 8 values (x's last dim), got (4,)",
        ),
        (
            lambda: torch_npu._npu_matmul_add_fp32(x, x, torch.zeros(8, 8, dtype=torch.float16, device="npu")),
            "_npu_matmul_add_fp32: C must be float32, got torch.float16",
        ),
        (
            lambda: torch_npu._npu_matmul_add_fp32(x, x[:1], torch.zeros(8, 8, device="npu")),
            "_npu_matmul_add_fp32: x (2, 8) and weight (1, 8) differ in k",
        ),
        (
            lambda: torch_npu._npu_matmul_add_fp32(x[0], x, torch.zeros(8, 8, device="npu")),
            "_npu_matmul_add_fp32: x and weight must be 2-D",
        ),
        (
            lambda: torch_npu._npu_matmul_add_fp32(x, x, torch.zeros(8, 4, device="npu")),
            "_npu_matmul_add_fp32: C must be [8, 8], got (8, 4)",
        ),
        (
            lambda: torch_npu._npu_quant_rms_norm(x, x[0], x[0], x[0, :1], x[0, :1].char(), x[:1].char()),
            "_npu_quant_rms_norm: output must have x's shape (2, 8), got (1, 8)",
        ),
        (
            lambda: torch_npu._npu_quantize_per_tensor(x, x[0], x[0].char(), x.clone()),
            "_npu_quantize_per_tensor: y must be int8, got torch.float16",
        ),
        (
            lambda: torch_npu.atb.npu_paged_cache_load(
                nz_key, nz_key, block_table, lengths.cumsum(0), cumsum=True, key=x, value=x
            ),  # fmt: skip
            "npu_paged_cache_load: cumsum and seq_starts need ND caches, not FRACTAL_NZ",
        ),
        (
            lambda: torch_npu.atb.npu_paged_cache_load(
                key_cache, value_cache, block_table, lengths, key=x, value=x[:1]
            ),
            "npu_paged_cache_load: key and value differ in tokens",
        ),
        (
            lambda: torch_npu.atb.npu_paged_cache_load(key_cache, value_cache, block_table, lengths, key=x, value=x),
            "npu_paged_cache_load: a token of key has 8 elements, a row of its cache 16",
        ),
    ]
    for call, message in cases:
        raises_operator_error(call, message)
