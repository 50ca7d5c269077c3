"""torch_npu's FLOPs formulas: the floating-point operations of one call, counted from its real arguments.

A multiply-add counts 2. Matrix products count 2·M·K·N (M: the rows of the left operand with its batch dimensions
folded in; a right operand's batch dimensions add nothing, grouped weights are one group each); attention counts
its two products, 2·B·N·(scores)·(D_qk + D_v), where the scores are S_q·S_kv cut down by the causal sparse modes or
by the valid blocks of a block-sparse mask. Quantisation, activation, collectives and routing add nothing.
"""

from itertools import pairwise
from math import prod

import torch

from ._flops_registry import register_npu_flop


def _shape(tensor):
    return tuple(int(d) for d in tensor.shape)


def _gemm(left_shape, right_shape, trans_right=False):
    """2·M·K·N of a left operand [..., M, K] (leading dimensions fold into M) and a right operand [..., K, N]
    ([..., N, K] when trans_right)."""
    if len(left_shape) < 2 or len(right_shape) < 2:
        raise ValueError(f"Matmul FLOPs requires rank >= 2: {left_shape}, {right_shape}")
    n = right_shape[-2] if trans_right else right_shape[-1]
    return int(2 * prod(left_shape[:-1]) * left_shape[-1] * n)


def _gemm_of(left, right, trans_right=False):
    return _gemm(_shape(left), _shape(right), trans_right)


def _sequence(value):
    """A list or tuple as it is; anything else through tolist(), which must give a sequence."""
    if isinstance(value, (list, tuple)):
        return value
    listed = value.tolist() if hasattr(value, "tolist") else None
    if isinstance(listed, (list, tuple)):
        return listed
    raise ValueError("Value must be a sequence or expose tolist() returning a sequence")


def _lengths(values, cumulative):
    """Per-item lengths from `values` (trailing zeros are padding); cumulative ends are differenced."""
    lengths = [int(v) for v in _sequence(values)]
    while lengths and lengths[-1] == 0:
        lengths.pop()
    if cumulative and lengths:
        lengths = [lengths[0]] + [b - a for a, b in pairwise(lengths)]
    return lengths


# --- matrix products


@register_npu_flop(target="torch:mm", is_default=True)
def mm_flops(input, mat2, **kwargs):
    return _gemm_of(input, mat2)


@register_npu_flop(target="torch:bmm", is_default=True)
def bmm_flops(input, mat2, **kwargs):
    return _gemm_of(input, mat2)


@register_npu_flop(target="torch:addmm", is_default=True)
def addmm_flops(input, mat1, mat2, beta=1, alpha=1, **kwargs):
    return _gemm_of(mat1, mat2)


@register_npu_flop(target="torch.nn.functional:linear", is_default=True)
def linear_flops(input, weight, bias=None, **kwargs):
    return _gemm_of(input, weight, trans_right=True)


def _broadcast(left, right):
    """The broadcast of two batch shapes (ValueError when they do not broadcast)."""
    width = max(len(left), len(right))
    left, right = (1,) * (width - len(left)) + left, (1,) * (width - len(right)) + right
    if any(a != b and 1 not in (a, b) for a, b in zip(left, right)):
        raise ValueError(f"Cannot broadcast matmul batch dimensions: {left}, {right}")
    return tuple(max(a, b) for a, b in zip(left, right))


@register_npu_flop(target="torch:matmul", is_default=True)
def matmul_flops(input, other, **kwargs):
    """torch.matmul's cases: dot product, vector-matrix, matrix-vector, and batched products whose batch
    dimensions broadcast."""
    left, right = _shape(input), _shape(other)
    if len(left) == 1 and len(right) == 1:
        return 2 * left[0]
    if len(left) == 1:
        batch, m, k, n = right[:-2], 1, left[0], right[-1]
    elif len(right) == 1:
        batch, m, k, n = left[:-2], left[-2], left[-1], 1
    else:
        batch, m, k, n = _broadcast(left[:-2], right[:-2]), left[-2], left[-1], right[-1]
    return 2 * prod(batch) * m * k * n


@register_npu_flop(target="torch_npu:npu_transpose_batchmatmul", is_default=True)
def npu_transpose_batchmatmul_flops(
    input, weight, *, bias=None, scale=None, perm_x1=None, perm_x2=None, perm_y=None, batch_split_factor=1, **kwargs
):
    def permuted(shape, perm):
        perm = tuple(range(len(shape))) if perm is None else tuple(int(p) for p in perm)
        if len(perm) != len(shape):
            raise ValueError(f"Permutation {perm} does not match tensor shape {shape}")
        return tuple(shape[p] for p in perm)

    return _gemm(permuted(_shape(input), perm_x1), permuted(_shape(weight), perm_x2))


@register_npu_flop(target="torch_npu:npu_quant_matmul_gelu", is_default=True)
def npu_quant_matmul_gelu_flops(x1, x2, x1_scale, x2_scale, *, bias=None, approximate="gelu_erf", **kwargs):
    return _gemm_of(x1, x2)


@register_npu_flop(target="torch_npu:npu_all_gather_base_mm", is_default=True)
def npu_all_gather_base_mm_flops(x1, x2, hcom, world_size, **kwargs):
    """The product of the gathered rows (world_size ranks' x1) with x2; the gather adds nothing."""
    rows, k = _shape(x1)[-2:]
    return 2 * rows * int(world_size) * k * _shape(x2)[-1]


# --- grouped products


def _group_rows(group_list, groups, rows):
    """The rows of each group of a split x: group_list as counts, or as cumulative ends when it ends at the total
    and its sum exceeds it."""
    if groups == 1:
        return [rows]
    if group_list is None:
        raise ValueError("Grouped matmul FLOPs requires group_list for split groups")
    sizes = [int(g) for g in _sequence(group_list)]
    if len(sizes) != groups:
        raise ValueError(f"Expected {groups} groups, got {len(sizes)}")
    if sizes[-1] == rows and sum(sizes) > rows:
        sizes = [sizes[0]] + [b - a for a, b in pairwise(sizes)]
    if sum(sizes) != rows:
        raise ValueError("group_list does not match grouped matmul token count")
    return sizes


@register_npu_flop(target="torch_npu:npu_grouped_matmul", is_default=True)
def npu_grouped_matmul_flops(x, weight, *, group_list=None, **kwargs):
    """One product per group: x and weight listed per group, or one x split over the weights by group_list."""
    xs = list(x) if isinstance(x, (list, tuple)) else [x]
    weights = list(weight) if isinstance(weight, (list, tuple)) else [weight]
    if len(xs) == len(weights):
        return sum(_gemm_of(a, b) for a, b in zip(xs, weights))
    if len(xs) != 1:
        raise ValueError(f"Grouped matmul FLOPs requires matching groups: {len(xs)}, {len(weights)}")
    shape = _shape(xs[0])
    rows = _group_rows(group_list, len(weights), prod(shape[:-1]))
    return sum(_gemm((m, shape[-1]), _shape(w)) for m, w in zip(rows, weights))


@register_npu_flop(target="torch_npu:npu_grouped_matmul_swiglu_quant_v2", is_default=True)
def npu_grouped_matmul_swiglu_quant_v2_flops(x, weight, weight_scale, x_scale, group_list, **kwargs):
    """Each token meets the weight of its group once: x's rows times one group's [K, N]."""
    first = weight[0] if isinstance(weight, (list, tuple)) else weight
    return _gemm_of(x, first)


def _gmm_alltoall_flops(
    gmm_x,
    gmm_weight,
    hcom,
    ep_world_size,
    send_counts,
    recv_counts,
    *,
    mm_x=None,
    mm_weight=None,
    trans_gmm_weight=False,
    trans_mm_weight=False,
    **kwargs,
):
    """The routed experts' grouped product, plus the shared expert's product when mm_x / mm_weight are given; the
    all-to-all adds nothing."""
    flops = _gemm_of(gmm_x, gmm_weight, trans_gmm_weight)
    if mm_x is not None and mm_weight is not None:
        flops += _gemm_of(mm_x, mm_weight, trans_mm_weight)
    return flops


npu_alltoallv_gmm_flops = register_npu_flop(target="torch_npu:npu_alltoallv_gmm", is_default=True)(_gmm_alltoall_flops)
npu_gmm_alltoallv_flops = register_npu_flop(target="torch_npu:npu_gmm_alltoallv", is_default=True)(_gmm_alltoall_flops)


# --- attention


def _head_dim(hidden, heads):
    if heads <= 0 or hidden % heads:
        raise ValueError(f"Hidden size {hidden} must be divisible by the number of heads {heads}")
    return hidden // heads


def _bnsd(shape, layout, heads):
    """(batch, heads, sequence, head dim) of an attention operand in `layout`."""
    if layout == "BNSD":
        return tuple(shape)
    if layout == "BSND":
        b, s, n, d = shape
        return b, n, s, d
    if layout in ("BSH", "SBH"):
        b, s, h = shape if layout == "BSH" else (shape[1], shape[0], shape[2])
        return b, heads, s, _head_dim(h, heads)
    raise ValueError(f"Invalid layout for FlashAttention input tensor: {layout}")


def _causal_scores(q_s, k_s, sparse_mode):
    """The attention scores computed: all of them (mode 0), or the causal part aligned at the top left (mode 2)
    or the bottom right (mode 3)."""
    if sparse_mode == 0:
        return q_s * k_s
    if sparse_mode == 2:
        return q_s * k_s - k_s * k_s / 2 if q_s >= k_s else q_s * q_s / 2
    if sparse_mode == 3:
        return k_s * k_s / 2 if q_s >= k_s else q_s * k_s - q_s * q_s / 2
    raise ValueError(f"Unknown FLOPs formula for sparse_mode={sparse_mode}")


def _calculate_common_layout_flops(q_shape, k_shape, v_shape, input_layout, sparse_mode, q_heads, kv_heads):
    b, n, q_s, q_d = _bnsd(q_shape, input_layout, q_heads)
    k_s = _bnsd(k_shape, input_layout, kv_heads)[2]
    v_d = _bnsd(v_shape, input_layout, kv_heads)[3]
    return int(2 * b * n * _causal_scores(q_s, k_s, sparse_mode) * (q_d + v_d))


def _tnd_flops(q_shape, v_shape, seq_q, seq_kv, heads=None):
    """TND: each batch item's S_q·S_kv from the cumulative sequence ends."""
    if seq_q is None or seq_kv is None:
        raise ValueError("TND layout requires actual_seq_qlen and actual_seq_kvlen")
    q_lens, kv_lens = _lengths(seq_q, True), _lengths(seq_kv, True)
    if len(q_lens) != len(kv_lens) or any(length <= 0 for length in q_lens + kv_lens):
        raise ValueError("actual_seq_qlen and actual_seq_kvlen must contain valid cumulative lengths")
    scores = sum(a * b for a, b in zip(q_lens, kv_lens))
    return int(2 * (heads or q_shape[1]) * (q_shape[2] + v_shape[2]) * scores)


def _kv_heads(q_shape, k_shape, layout, q_heads):
    if layout == "BNSD":
        return k_shape[1]
    if layout == "BSND":
        return k_shape[2]
    if layout in ("BSH", "SBH"):
        return _head_dim(k_shape[2], _head_dim(q_shape[2], q_heads))
    return q_heads


@register_npu_flop(target="torch_npu:npu_fusion_attention", is_default=True)
def npu_fusion_attention_flops(query, key, value, head_num, input_layout, *args, **kwargs):
    """Arguments after input_layout may come by position, as the operator's schema orders them."""
    names = [a.name for a in torch.ops.npu.npu_fusion_attention.default._schema.arguments[5:]]
    options = {**dict(zip(names, args)), **kwargs}
    q, k, v = _shape(query), _shape(key), _shape(value)
    if input_layout == "TND":
        return _tnd_flops(q, v, options.get("actual_seq_qlen"), options.get("actual_seq_kvlen"))
    return _calculate_common_layout_flops(
        q, k, v, input_layout, options.get("sparse_mode", 0), head_num, _kv_heads(q, k, input_layout, head_num)
    )


@register_npu_flop(target="torch_npu:npu_fused_infer_attention_score", is_default=True)
def npu_fused_infer_attention_score_flops(
    query,
    key,
    value,
    *,
    input_layout="BSH",
    num_heads=1,
    num_key_value_heads=0,
    actual_seq_lengths=None,
    actual_seq_lengths_kv=None,
    sparse_mode=0,
    **kwargs,
):
    q, k, v = _shape(query), _shape(key), _shape(value)
    if input_layout == "TND":
        return _tnd_flops(q, v, actual_seq_lengths, actual_seq_lengths_kv, num_heads)
    return _calculate_common_layout_flops(
        q, k, v, input_layout, sparse_mode, num_heads, num_key_value_heads or num_heads
    )


def _sequence_dims(shape, layout, heads):
    """(heads, sequence, head dim) of a block-sparse attention operand; TND is [tokens, heads, dim]."""
    if layout == "TND":
        t, n, d = shape
        return n, t, d
    return _bnsd(shape, layout, heads)[1:]


@register_npu_flop(target="torch_npu:npu_block_sparse_attention", is_default=True)
def npu_block_sparse_attention_flops(
    query,
    key,
    value,
    block_sparse_mask,
    block_shape,
    *,
    q_input_layout="TND",
    kv_input_layout="TND",
    num_key_value_heads=1,
    actual_seq_lengths=None,
    actual_seq_lengths_kv=None,
    **kwargs,
):
    """2·(scores of the valid blocks)·(D_qk + D_v): a valid block [i, j] of a batch item's head computes the scores
    of its query rows and key columns that lie inside that item's lengths."""
    mask = _sequence(block_sparse_mask)
    _, q_s, q_d = _sequence_dims(_shape(query), q_input_layout, len(mask[0]) if mask else 1)
    _, kv_s, v_d = _sequence_dims(_shape(value), kv_input_layout, num_key_value_heads)

    def per_item(values, default, cumulative):
        if values is None:
            return [default] * len(mask)
        lengths = _lengths(values, cumulative)
        if len(lengths) != len(mask):
            raise ValueError(f"Expected {len(mask)} sequence lengths, got {len(lengths)}")
        if any(length < 0 for length in lengths):
            raise ValueError("Sequence lengths must be non-negative")
        return lengths

    q_lens = per_item(actual_seq_lengths, q_s, q_input_layout == "TND")
    kv_lens = per_item(actual_seq_lengths_kv, kv_s, kv_input_layout == "TND")
    rows, cols = (int(d) for d in block_shape)
    scores = 0
    for item, heads in enumerate(mask):
        for head in heads:
            for i, blocks in enumerate(head):
                q_tokens = min(rows, max(q_lens[item] - i * rows, 0))
                for j, valid in enumerate(blocks):
                    if valid:
                        scores += q_tokens * min(cols, max(kv_lens[item] - j * cols, 0))
    return int(2 * scores * (q_d + v_d))
