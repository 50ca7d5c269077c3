"""npu_nsa_compress / npu_nsa_compress_grad: Native Sparse Attention's key / value compression, a learned weighted
sum over sliding windows of the sequence (NsaCompress, TND layout).

input [T, N, D] holds the segments (sequences) one after another, actual_seq_len their cumulative ends (the last
equal to T); weight [compress_block_size, N]. Inside each segment of length L, window i (0 <= i <= (L - l) / d,
l = compress_block_size, d = compress_stride) covers tokens [i * d, i * d + l):
    out[w, n, :] = sum_j weight[j, n] * input[start + j, n, :]
The windows of all segments are concatenated ([T', N, D], T' = sum max(0, 1 + (L - l) // d)); sums accumulate in
float32 and round to input's dtype. The grad returns (d input, d weight); npu_nsa_compress is differentiable.
npu_nsa_compress_infer.cache (decoding): input is a paged cache [blocks, page_block_size, N, D] read through
block_table, actual_seq_len the per-batch lengths; when a batch's length L completes a window (L >= l and
(L - l) % d == 0) its last window is compressed into cache[slot_mapping[b]]; cache returned.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_nsa_compress"


def window_starts(actual_seq_len, total, block, stride, op):
    """The first token of every window, segment by segment."""
    check(actual_seq_len is not None and len(actual_seq_len) > 0, op, "actual_seq_len (cumulative segment ends) is required")  # fmt: skip
    ends = [int(e) for e in actual_seq_len]
    check(all(a <= b for a, b in zip([0, *ends], ends)) and ends[-1] == total, op,
          f"actual_seq_len must be non-decreasing cumulative lengths ending at T = {total}, got {ends}")  # fmt: skip
    check(
        block > 0 and stride > 0, op, f"compress_block_size and compress_stride must be positive, got {block}, {stride}"
    )
    starts = []
    for begin, end in zip([0, *ends[:-1]], ends):
        length = end - begin
        if length >= block:
            starts.extend(begin + i * stride for i in range(1 + (length - block) // stride))
    return starts


def _checks(input, weight, block, op):  # noqa: A002 - op-plugin's argument name
    check(input.dim() == 3, op, f"input must be [T, N, D], got {tuple(input.shape)}")
    check(tuple(weight.shape) == (block, input.shape[1]), op, f"weight must be [{block}, {input.shape[1]}], got {tuple(weight.shape)}")  # fmt: skip
    check(weight.dtype == input.dtype, op, f"weight must have input's dtype {input.dtype}, got {weight.dtype}")


def _windows(input, starts, block):  # noqa: A002
    """[T', block, N, D] float32 windows."""
    index = torch.tensor(starts, device=input.device, dtype=torch.long)[:, None] + torch.arange(block, device=input.device)  # fmt: skip
    return input.float()[index]


def _setup(ctx, inputs, output, keyword_only_inputs=None):
    ctx.args = (inputs[2], inputs[3], (keyword_only_inputs or {}).get("actual_seq_len"))
    ctx.save_for_backward(inputs[0], inputs[1])


def _backward(ctx, grad):
    input, weight = ctx.saved_tensors  # noqa: A001
    block, stride, lengths = ctx.args
    d_input, d_weight = torch.ops.npu.npu_nsa_compress_grad(grad, input, weight, block, stride, actual_seq_len=lengths)
    return d_input, d_weight, None, None


def _fake(input, weight, compress_block_size, compress_stride, *, actual_seq_len=None):  # noqa: A002
    count = len(window_starts(actual_seq_len, input.shape[0], compress_block_size, compress_stride, _OP))
    return input.new_empty(count, *input.shape[1:])


@npu_op(
    "npu_nsa_compress(Tensor input, Tensor weight, int compress_block_size, int compress_stride, *, "
    "int[]? actual_seq_len=None) -> Tensor",
    fake=_fake,
    backward=_backward,
    setup_context=_setup,
)
def npu_nsa_compress(input, weight, compress_block_size, compress_stride, *, actual_seq_len=None):  # noqa: A002
    """[T', N, D]: the compressed windows."""
    _checks(input, weight, compress_block_size, _OP)
    starts = window_starts(actual_seq_len, input.shape[0], compress_block_size, compress_stride, _OP)
    if not starts:
        return input.new_empty(0, *input.shape[1:])
    out = torch.einsum("wjnd,jn->wnd", _windows(input, starts, compress_block_size), weight.float())
    return out.to(input.dtype)


@npu_op(
    "npu_nsa_compress_grad(Tensor grad, Tensor input, Tensor weight, int compress_block_size, int compress_stride, "
    "*, int[]? actual_seq_len=None) -> (Tensor, Tensor)",
    fake=lambda grad, input, weight, *args, **kwargs: (torch.empty_like(input), torch.empty_like(weight)),
)
def npu_nsa_compress_grad(grad, input, weight, compress_block_size, compress_stride, *, actual_seq_len=None):  # noqa: A002
    """(d input [T, N, D], d weight [block, N])."""
    op = "npu_nsa_compress_grad"
    _checks(input, weight, compress_block_size, op)
    starts = window_starts(actual_seq_len, input.shape[0], compress_block_size, compress_stride, op)
    check(grad.shape[0] == len(starts) and grad.shape[1:] == input.shape[1:], op,
          f"grad must be [{len(starts)}, {input.shape[1]}, {input.shape[2]}], got {tuple(grad.shape)}")  # fmt: skip
    d_input = torch.zeros(input.shape, device=input.device)
    if not starts:
        return d_input.to(input.dtype), torch.zeros_like(weight)
    g = grad.float()
    d_weight = torch.einsum("wjnd,wnd->jn", _windows(input, starts, compress_block_size), g)
    index = torch.tensor(starts, device=input.device)[:, None] + torch.arange(compress_block_size, device=input.device)
    contributions = torch.einsum("wnd,jn->wjnd", g, weight.float())
    d_input.index_add_(0, index.reshape(-1), contributions.reshape(-1, *input.shape[1:]))
    return d_input.to(input.dtype), d_weight.to(weight.dtype)


@npu_op(
    "npu_nsa_compress_infer.cache(Tensor input, Tensor weight, Tensor slot_mapping, int compress_block_size, "
    "int compress_stride, int page_block_size, *, Tensor? block_table=None, int[]? actual_seq_len=None, "
    "Tensor(a!) cache) -> Tensor(a!)",
    fake=lambda input, weight, slot_mapping, *args, cache, **kwargs: cache,
)
def npu_nsa_compress_infer_cache(input, weight, slot_mapping, compress_block_size, compress_stride, page_block_size,  # noqa: A002
                                 *, block_table=None, actual_seq_len=None, cache):  # fmt: skip
    """The windows the latest tokens complete, compressed into cache; cache returned."""
    op = "npu_nsa_compress_infer"
    check(input.dim() == 4 and input.shape[1] == page_block_size, op,
          f"input must be a paged cache [blocks, {page_block_size}, N, D], got {tuple(input.shape)}")  # fmt: skip
    check(tuple(weight.shape) == (compress_block_size, input.shape[2]), op, f"weight must be [{compress_block_size}, {input.shape[2]}], got {tuple(weight.shape)}")  # fmt: skip
    check(actual_seq_len is not None and block_table is not None and len(actual_seq_len) == block_table.shape[0], op,
          "actual_seq_len (per batch) and block_table (one row per batch) are required")  # fmt: skip
    check(cache.dim() == 3 and cache.shape[1:] == input.shape[2:], op, f"cache must be [slots, {input.shape[2]}, {input.shape[3]}], got {tuple(cache.shape)}")  # fmt: skip
    for b, length in enumerate(int(v) for v in actual_seq_len):
        if length < compress_block_size or (length - compress_block_size) % compress_stride:
            continue
        positions = torch.arange(length - compress_block_size, length, device=input.device)
        window = input[block_table[b].long()[positions // page_block_size], positions % page_block_size].float()
        cache[int(slot_mapping[b])] = torch.einsum("jnd,jn->nd", window, weight.float()).to(cache.dtype)
    return cache
