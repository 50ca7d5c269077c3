"""npu_fused_infer_attention_score_v2 and the graph-mode helpers of both fused-infer-attention versions.

v2 is npu_fused_infer_attention_score with renamed arguments (num_query_heads, softmax_scale, actual_seq_qlen /
actual_seq_kvlen, return_softmax_lse; key/value antiquant as dequant_scale_key/value with key_/value_quant_mode,
int8 output as quant_scale_out/offset_out) plus learnable_sink: one learnable score per query head that joins
every row's softmax with a zero value (attention sinks). With layout TND and a paged cache (block_table),
actual_seq_kvlen holds each batch's own key/value length; without one both lists are cumulative.
The .out overloads write into caller-given tensors (aclgraph capture); _get_max_workspace returns the scratch
buffer those take, empty because the host kernels need none; _infer_output allocates the outputs a call will
produce. Not supported: a quantised query (dequant_scale_query, quant_scale_p), key_rope dequantisation and the
float8 / hifloat8 dtype arguments.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.attention_infer import (
    _BIG,
    _dequantised,
    _infer_attention,
    _quantised_output,
    _unsupported,
    with_rope,
)
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_fused_infer_attention_score_v2"
_DTYPE_ARGS = (
    "query_dtype",
    "key_dtype",
    "value_dtype",
    "query_rope_dtype",
    "key_rope_dtype",
    "key_shared_prefix_dtype",
    "value_shared_prefix_dtype",
    "dequant_scale_query_dtype",
    "dequant_scale_key_dtype",
    "dequant_scale_value_dtype",
    "dequant_scale_key_rope_dtype",
    "out_dtype",
)
_V2_ARGS = (
    "Tensor query, Tensor key, Tensor value, *, Tensor? query_rope=None, Tensor? key_rope=None, "
    "Tensor? pse_shift=None, Tensor? atten_mask=None, SymInt[]? actual_seq_qlen=None, SymInt[]? actual_seq_kvlen=None, "
    "Tensor? block_table=None, Tensor? dequant_scale_query=None, Tensor? dequant_scale_key=None, "
    "Tensor? dequant_offset_key=None, Tensor? dequant_scale_value=None, Tensor? dequant_offset_value=None, "
    "Tensor? dequant_scale_key_rope=None, Tensor? quant_scale_out=None, Tensor? quant_offset_out=None, "
    "Tensor? quant_scale_p=None, Tensor? learnable_sink=None, int num_query_heads=1, int num_key_value_heads=0, "
    'float softmax_scale=1.0, int pre_tokens=2147483647, int next_tokens=2147483647, str input_layout="BSH", '
    "int sparse_mode=0, int block_size=0, int query_quant_mode=0, int key_quant_mode=0, int value_quant_mode=0, "
    "int inner_precise=0, bool return_softmax_lse=False, " + ", ".join(f"int? {name}=None" for name in _DTYPE_ARGS)
)


def npu_fused_infer_attention_score_v2(
    query,
    key,
    value,
    *,
    query_rope=None,
    key_rope=None,
    pse_shift=None,
    atten_mask=None,
    actual_seq_qlen=None,
    actual_seq_kvlen=None,
    block_table=None,
    dequant_scale_query=None,
    dequant_scale_key=None,
    dequant_offset_key=None,
    dequant_scale_value=None,
    dequant_offset_value=None,
    dequant_scale_key_rope=None,
    quant_scale_out=None,
    quant_offset_out=None,
    quant_scale_p=None,
    learnable_sink=None,
    num_query_heads=1,
    num_key_value_heads=0,
    softmax_scale=1.0,
    pre_tokens=_BIG,
    next_tokens=_BIG,
    input_layout="BSH",
    sparse_mode=0,
    block_size=0,
    query_quant_mode=0,
    key_quant_mode=0,
    value_quant_mode=0,
    inner_precise=0,
    return_softmax_lse=False,
    **dtypes,
):
    """(attention_out, softmax_lse): softmax_lse float32 [B, N, S1, 1] (TND: [T, N, 1]) when return_softmax_lse,
    else empty; with learnable_sink it is the logsumexp of the scores and the sink."""
    _unsupported(
        _OP,
        dequant_scale_query=dequant_scale_query,
        quant_scale_p=quant_scale_p,
        dequant_scale_key_rope=dequant_scale_key_rope,
    )
    for name in _DTYPE_ARGS:
        check(dtypes.get(name) is None, _OP, f"{name} (float8 / hifloat8 inputs) is not supported by vnpu")
    check(
        query.dtype in (torch.float16, torch.bfloat16, torch.float32),
        _OP,
        f"query must be float16, bfloat16 or float32 (a quantised query is not supported by vnpu), got {query.dtype}",
    )
    if dequant_scale_key is not None or dequant_scale_value is not None:
        key, value = _dequantised(
            _OP,
            key,
            value,
            input_layout,
            query.dtype,
            (dequant_scale_key, dequant_offset_key),
            (dequant_scale_value, dequant_offset_value),
            key_quant_mode,
            value_quant_mode,
        )
    if query_rope is not None:
        query, key = with_rope(
            _OP,
            query,
            query_rope,
            key,
            key_rope,
            input_layout,
            num_query_heads,
            num_key_value_heads,
            block_table is not None,
        )
    out, lse = _infer_attention(
        _OP,
        query,
        key,
        value,
        pse_shift=pse_shift,
        atten_mask=atten_mask,
        actual_seq_lengths=actual_seq_qlen,
        actual_seq_lengths_kv=actual_seq_kvlen,
        block_table=block_table,
        num_heads=num_query_heads,
        scale=softmax_scale,
        pre_tokens=pre_tokens,
        next_tokens=next_tokens,
        input_layout=input_layout,
        num_key_value_heads=num_key_value_heads,
        sparse_mode=sparse_mode,
        block_size=block_size,
        sink=learnable_sink,
        length_names=("actual_seq_qlen", "actual_seq_kvlen"),
    )
    out = _quantised_output(_OP, out, input_layout, quant_scale_out, quant_offset_out)
    return out, (lse if return_softmax_lse else out.new_empty(0, dtype=torch.float32))


npu_op(f"npu_fused_infer_attention_score_v2({_V2_ARGS}) -> (Tensor, Tensor)")(npu_fused_infer_attention_score_v2)


def _write_out(result, attention_out, softmax_lse, with_lse):
    """The results into the caller's tensors. Without softmax_lse requested the card's kernel leaves that tensor
    alone, so any placeholder is accepted (inference engines pass a one-element buffer)."""
    pairs = [(attention_out, result[0])] + ([(softmax_lse, result[1])] if with_lse else [])
    for target, value in pairs:
        check(
            target.shape == value.shape and target.dtype == value.dtype,
            _OP,
            f"the out tensor must be {tuple(value.shape)} {value.dtype}, got {tuple(target.shape)} {target.dtype}",
        )
        target.copy_(value)
    return attention_out, softmax_lse


def _v2_out(query, key, value, *, workspace=None, attention_out, softmax_lse, **kwargs):
    result = npu_fused_infer_attention_score_v2(query, key, value, **kwargs)
    return _write_out(result, attention_out, softmax_lse, kwargs.get("return_softmax_lse", False))


npu_op(
    f"npu_fused_infer_attention_score_v2.out({_V2_ARGS}, Tensor? workspace=None, Tensor(a!) attention_out, "
    "Tensor(b!) softmax_lse) -> (Tensor(a!), Tensor(b!))",
    fake=lambda *a, attention_out, softmax_lse, **k: (attention_out, softmax_lse),
)(_v2_out)


def _v1_out(query, key, value, *, workspace=None, attention_out, softmax_lse, **kwargs):
    result = torch.ops.npu.npu_fused_infer_attention_score(query, key, value, **kwargs)
    return _write_out(result, attention_out, softmax_lse, kwargs.get("softmax_lse_flag", False))


def _v1_args():
    schema = torch.ops.npu.npu_fused_infer_attention_score.default._schema
    return str(schema).split("(", 1)[1].rsplit(") ->", 1)[0]


npu_op(
    f"npu_fused_infer_attention_score.out({_v1_args()}, Tensor? workspace=None, Tensor(a!) attention_out, "
    "Tensor(b!) softmax_lse) -> (Tensor(a!), Tensor(b!))",
    fake=lambda *a, attention_out, softmax_lse, **k: (attention_out, softmax_lse),
)(_v1_out)


def _no_workspace(query, key, value, **kwargs):
    """The scratch buffer the .out overloads take: the host kernels need none."""
    return query.new_empty(0, dtype=torch.uint8)


npu_op(
    f"_npu_fused_infer_attention_score_get_max_workspace({_v1_args()}) -> Tensor",
)(_no_workspace)
npu_op(f"_npu_fused_infer_attention_score_v2_get_max_workspace({_V2_ARGS}) -> Tensor")(_no_workspace)


def _outputs(query, value, input_layout, quant_scale, block_table, heads, kv_heads, with_lse):
    """Empty (attention_out, softmax_lse) of the shapes and dtypes a call with these inputs returns: the query's
    tokens and heads in the output layout, the value's head width."""
    in_layout, out_layout = input_layout.split("_") if "_" in input_layout else (input_layout, input_layout)
    if value.dim() == 4 or (block_table is None and in_layout != "BSH"):
        width = value.shape[-1]
    else:
        width = value.shape[-1] // (kv_heads or heads)
    if in_layout in ("TND", "NTD"):
        t, n = (query.shape[0], query.shape[1]) if in_layout == "TND" else (query.shape[1], query.shape[0])
        shape = (t, n, width) if out_layout == "TND" else (n, t, width)
        lse_shape = (t, n, 1)
    else:
        b, n, s = {
            "BSH": (query.shape[0], heads, query.shape[1]),
            "BSND": (query.shape[0], query.shape[2], query.shape[1]),
            "BNSD": (query.shape[0], query.shape[1], query.shape[2]),
        }[in_layout]
        shape = {
            "BSH": (b, s, n * width),
            "BSND": (b, s, n, width),
            "BNSD": (b, n, s, width),
            "NBSD": (n, b, s, width),
        }[out_layout]
        lse_shape = (b, n, s, 1)
    dtype = torch.int8 if quant_scale is not None else torch.float16 if query.dtype == torch.int8 else query.dtype
    out = query.new_empty(shape, dtype=dtype)
    return out, query.new_empty(lse_shape if with_lse else (0,), dtype=torch.float32)


def _v1_infer_output(
    query,
    value,
    *,
    input_layout="BSH",
    quant_scale2=None,
    block_table=None,
    num_heads=1,
    num_key_value_heads=0,
    softmax_lse_flag=False,
    query_rope=None,
):
    out, lse = _outputs(
        query, value, input_layout, quant_scale2, block_table, num_heads, num_key_value_heads, softmax_lse_flag
    )
    # The first version's kernel hands back a one-element softmax_lse when it is not requested (v2: an empty one).
    return out, (lse if softmax_lse_flag else query.new_empty(1, dtype=torch.float32))


npu_op(
    '_npu_fused_infer_attention_score_infer_output(Tensor query, Tensor value, *, str input_layout="BSH", '
    "Tensor? quant_scale2=None, Tensor? block_table=None, int num_heads=1, int num_key_value_heads=0, "
    "bool softmax_lse_flag=False, Tensor? query_rope=None) -> (Tensor, Tensor)"
)(_v1_infer_output)


def _v2_infer_output(
    query,
    value,
    *,
    query_dtype=None,
    value_dtype=None,
    input_layout="BSH",
    quant_scale_out=None,
    block_table=None,
    num_query_heads=1,
    num_key_value_heads=0,
    return_softmax_lse=False,
    query_rope=None,
    out_dtype=None,
):
    for name, given in (("query_dtype", query_dtype), ("value_dtype", value_dtype), ("out_dtype", out_dtype)):
        check(given is None, _OP, f"{name} (float8 / hifloat8 inputs) is not supported by vnpu")
    return _outputs(
        query,
        value,
        input_layout,
        quant_scale_out,
        block_table,
        num_query_heads,
        num_key_value_heads,
        return_softmax_lse,
    )


npu_op(
    "_npu_fused_infer_attention_score_v2_infer_output(Tensor query, Tensor value, *, int? query_dtype=None, "
    'int? value_dtype=None, str input_layout="BSH", Tensor? quant_scale_out=None, Tensor? block_table=None, '
    "int num_query_heads=1, int num_key_value_heads=0, bool return_softmax_lse=False, Tensor? query_rope=None, "
    "int? out_dtype=None) -> (Tensor, Tensor)"
)(_v2_infer_output)
