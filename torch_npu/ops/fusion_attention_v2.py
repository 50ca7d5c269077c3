"""npu_fusion_attention_v2 (and npu_fusion_attention_grad_v2): npu_fusion_attention with rotary parts of the query and key heads passed apart
(query_rope / key_rope, as MLA keeps them), a choice of where the position bias enters (pse_type) and
keyword-only options.

The rope parts join their heads for Q @ K^T (each head's [D] and [Dr] concatenated; V keeps [D]).
pse_type 1 (the default, and npu_fusion_attention's rule) adds pse before scaling: scale * (Q @ K^T + pse);
pse_type 0 adds it after: scale * (Q @ K^T) + pse. pse_type 2 and 3 (ALiBi biases generated from slopes
inside the kernel) are not computed by vnpu and are refused. Forward and backward run npu_fusion_attention's
kernels, so dropout uses the seed the forward drew and the statistics are the same.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.fusion_attention import (
    fusion_attention_fake,
    npu_fusion_attention,
    npu_fusion_attention_grad,
    saved_forward_grad,
)
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_fusion_attention_v2"
_SPLIT_HIDDEN = ("BSH", "SBH")  # layouts whose last dim holds every head: rope parts join head by head


def _with_rope(x, rope, head_num, layout):
    if rope is None:
        return x
    if layout in _SPLIT_HIDDEN:
        heads = x.unflatten(-1, (head_num, -1))
        return torch.cat([heads, rope.unflatten(-1, (head_num, -1))], -1).flatten(-2)
    return torch.cat([x, rope], -1)


def _without_rope(grad, rope, head_num, layout):
    """(the gradient of the head part, of the rope part) of a concatenated gradient."""
    if rope is None:
        return grad, None
    if layout in _SPLIT_HIDDEN:
        heads = grad.unflatten(-1, (head_num, -1))
        width = rope.shape[-1] // head_num
        return heads[..., :-width].flatten(-2), heads[..., -width:].flatten(-2)
    width = rope.shape[-1]
    return grad[..., :-width], grad[..., -width:]


def _v1_pse(pse, pse_type, scale):
    check(
        pse_type in (0, 1),
        _OP,
        f"pse_type={pse_type}: ALiBi biases generated inside the kernel (pse_type 2, 3) are not supported on vnpu; "
        "pass the bias itself with pse_type 0 or 1",
    )
    return pse if pse is None or pse_type == 1 else pse / scale


_BIG = 2147483647
_DEFAULTS = {
    "pse": None,
    "padding_mask": None,
    "atten_mask": None,
    "query_rope": None,
    "key_rope": None,
    "scale": 1.0,
    "keep_prob": 1.0,
    "pre_tokens": _BIG,
    "next_tokens": _BIG,
    "inner_precise": 0,
    "prefix": None,
    "actual_seq_qlen": None,
    "actual_seq_kvlen": None,
    "sparse_mode": 0,
    "gen_mask_parallel": True,
    "sync": False,
    "pse_type": 1,
    "q_start_idx": None,
    "kv_start_idx": None,
    "softmax_layout": "",
    "sink": None,
    "dropout_mask": None,
    "seed": 0,
    "offset": 0,
}


def _v1_kwargs(kw):
    return {
        "padding_mask": kw["padding_mask"],
        "atten_mask": kw["atten_mask"],
        "scale": kw["scale"],
        "keep_prob": kw["keep_prob"],
        "pre_tockens": kw["pre_tokens"],
        "next_tockens": kw["next_tokens"],
        "inner_precise": kw["inner_precise"],
        "prefix": kw["prefix"],
        "actual_seq_qlen": kw["actual_seq_qlen"],
        "actual_seq_kvlen": kw["actual_seq_kvlen"],
        "sparse_mode": kw["sparse_mode"],
        "gen_mask_parallel": kw["gen_mask_parallel"],
        "sync": kw["sync"],
        "softmax_layout": kw["softmax_layout"],
        "sink": kw["sink"],
        "dropout_mask": kw["dropout_mask"],
        "offset": kw["offset"],
    }


def npu_fusion_attention_v2(query, key, value, head_num, input_layout, **kw):
    kw = {**_DEFAULTS, **kw}
    q = _with_rope(query, kw["query_rope"], head_num, input_layout)
    k = _with_rope(key, kw["key_rope"], head_num, input_layout)
    pse = _v1_pse(kw["pse"], kw["pse_type"], kw["scale"])
    return npu_fusion_attention(q, k, value, head_num, input_layout, pse, seed=kw["seed"], **_v1_kwargs(kw))


def _fake(query, key, value, head_num, input_layout, **kw):
    q = _with_rope(query, kw.get("query_rope"), head_num, input_layout)
    k = _with_rope(key, kw.get("key_rope"), head_num, input_layout)
    return fusion_attention_fake(q, k, value, head_num, input_layout)


def _setup(ctx, inputs, output, keyword_only_inputs=None):
    query, key, value, head_num, layout = inputs
    kw = {**_DEFAULTS, **(keyword_only_inputs or {})}
    ctx.inputs, ctx.kw = (query, key, value, head_num, layout), kw
    # outputs go through save_for_backward: kept as ctx attributes they would form a cycle with this node that
    # Python's collector cannot break, and every step's attention output would leak
    ctx.save_for_backward(output[0], output[1], output[2])
    ctx.seed = output[4]


def _backward(ctx, dout, *unused):
    query, key, value, head_num, layout = ctx.inputs
    kw = ctx.kw
    q = _with_rope(query, kw["query_rope"], head_num, layout)
    k = _with_rope(key, kw["key_rope"], head_num, layout)
    options = {
        **_v1_kwargs(kw),
        "pse": _v1_pse(kw["pse"], kw["pse_type"], kw["scale"]),
        "pre_tockens": kw["pre_tokens"],
        "next_tockens": kw["next_tokens"],
    }
    dq, dk, dv, dpse, dsink = saved_forward_grad(ctx, q, k, value, dout, head_num, layout, options)
    dquery, dquery_rope = _without_rope(dq, kw["query_rope"], head_num, layout)
    dkey, dkey_rope = _without_rope(dk, kw["key_rope"], head_num, layout)
    ctx.keyword_grads = {"query_rope": dquery_rope, "key_rope": dkey_rope}
    if kw["pse"] is not None:
        ctx.keyword_grads["pse"] = dpse if kw["pse_type"] == 1 else dpse / kw["scale"]
    if kw["sink"] is not None:
        ctx.keyword_grads["sink"] = dsink
    return dquery, dkey, dv, None, None


npu_op(
    "npu_fusion_attention_v2(Tensor query, Tensor key, Tensor value, int head_num, str input_layout, *, "
    "Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, Tensor? query_rope=None, "
    "Tensor? key_rope=None, float scale=1., float keep_prob=1., int pre_tokens=2147483647, "
    "int next_tokens=2147483647, int inner_precise=0, int[]? prefix=None, int[]? actual_seq_qlen=None, "
    "int[]? actual_seq_kvlen=None, int sparse_mode=0, bool gen_mask_parallel=True, bool sync=False, "
    'int pse_type=1, int[]? q_start_idx=None, int[]? kv_start_idx=None, str softmax_layout="", '
    "Tensor? sink=None, Tensor? dropout_mask=None, int seed=0, int offset=0) "
    "-> (Tensor, Tensor, Tensor, Tensor, int, int, int)",
    fake=_fake,
    backward=_backward,
    setup_context=_setup,
)(npu_fusion_attention_v2)


def npu_fusion_attention_grad_v2(query, key, value, dy, head_num, input_layout, **kw):
    """(dq, dk, dv, dpse, dquery_rope, dkey_rope, dsink) of npu_fusion_attention_v2; the rope and pse outputs
    are empty when the forward had none."""
    saved = {"softmax_max": None, "softmax_sum": None, "attention_in": None, "scale_value": 1.0}
    kw = {**_DEFAULTS, **saved, **kw}
    q = _with_rope(query, kw["query_rope"], head_num, input_layout)
    k = _with_rope(key, kw["key_rope"], head_num, input_layout)
    pse = _v1_pse(kw["pse"], kw["pse_type"], kw["scale_value"])
    dq, dk, dv, dpse, dsink = npu_fusion_attention_grad(
        q, k, value, dy, head_num, input_layout, pse=pse, atten_mask=kw["atten_mask"], softmax_max=kw["softmax_max"],
        softmax_sum=kw["softmax_sum"], attention_in=kw["attention_in"], scale_value=kw["scale_value"],
        keep_prob=kw["keep_prob"], pre_tockens=kw["pre_tokens"], next_tockens=kw["next_tokens"], seed=kw["seed"],
        prefix=kw["prefix"], actual_seq_qlen=kw["actual_seq_qlen"], actual_seq_kvlen=kw["actual_seq_kvlen"],
        sparse_mode=kw["sparse_mode"], sink=kw["sink"],
    )  # fmt: skip
    dquery, dquery_rope = _without_rope(dq, kw["query_rope"], head_num, input_layout)
    dkey, dkey_rope = _without_rope(dk, kw["key_rope"], head_num, input_layout)
    if kw["pse"] is not None and kw["pse_type"] == 0:
        dpse = dpse / kw["scale_value"]
    empty = query.new_empty(0)
    return (dquery, dkey, dv, dpse, empty if dquery_rope is None else dquery_rope,
            empty if dkey_rope is None else dkey_rope, dsink)  # fmt: skip


def _grad_fake(query, key, value, dy, head_num, input_layout, **kw):
    empty = query.new_empty(0)
    like = lambda t: empty if t is None else torch.empty_like(t)  # noqa: E731
    return (torch.empty_like(query), torch.empty_like(key), torch.empty_like(value), like(kw.get("pse")),
            like(kw.get("query_rope")), like(kw.get("key_rope")), like(kw.get("sink")))  # fmt: skip


npu_op(
    "npu_fusion_attention_grad_v2(Tensor query, Tensor key, Tensor value, Tensor dy, int head_num, "
    "str input_layout, *, Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, "
    "Tensor? softmax_max=None, Tensor? softmax_sum=None, Tensor? softmax_in=None, Tensor? attention_in=None, "
    "Tensor? query_rope=None, Tensor? key_rope=None, float scale_value=1., float keep_prob=1., "
    "int pre_tokens=2147483647, int next_tokens=2147483647, int inner_precise=0, int seed=0, int offset=0, "
    "int numels=0, int[]? prefix=None, int[]? actual_seq_qlen=None, int[]? actual_seq_kvlen=None, "
    "int sparse_mode=0, bool gen_mask_parallel=True, bool sync=False, int pse_type=1, int[]? q_start_idx=None, "
    'int[]? kv_start_idx=None, str softmax_layout="", Tensor? sink=None) '
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    fake=_grad_fake,
)(npu_fusion_attention_grad_v2)
