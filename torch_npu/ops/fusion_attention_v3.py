"""npu_fusion_attention_v3 / npu_fusion_attention_grad_v3: npu_fusion_attention and its grad with the graph-mode
argument forms — actual_seq_qlen / actual_seq_kvlen as int64 tensors (cumulative lengths), the dropout seed and
offset as int64 tensors ([1] each) instead of integers — so that nothing the call depends on leaves the device.
Semantics, layouts, sparse modes and the learnable sink are npu_fusion_attention's.
"""

import torch

from torch_npu.ops.fusion_attention import (
    fusion_attention_fake,
    input_grads,
    npu_fusion_attention,
    npu_fusion_attention_grad,
)
from torch_npu.ops.registration import npu_op

__all__ = []

_BIG = 2147483647
_NAMES = (
    "query", "key", "value", "head_num", "input_layout", "pse", "padding_mask", "atten_mask", "scale", "keep_prob",
    "pre_tockens", "next_tockens", "inner_precise", "prefix", "actual_seq_qlen", "actual_seq_kvlen", "sparse_mode",
    "gen_mask_parallel", "sync", "softmax_layout", "sink",
)  # fmt: skip


def _lengths(cumulative):
    return None if cumulative is None else [int(n) for n in cumulative.tolist()]


def _as_tensor(value, like):
    return torch.tensor([int(value)], dtype=torch.int64, device=like.device)


def npu_fusion_attention_v3(query, key, value, head_num, input_layout, pse=None, padding_mask=None,
                            atten_mask=None, scale=1.0, keep_prob=1.0, pre_tockens=_BIG, next_tockens=_BIG,
                            inner_precise=0, prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None,
                            sparse_mode=0, gen_mask_parallel=True, sync=False, softmax_layout="", sink=None):  # fmt: skip
    """(attention_out, softmax_max, softmax_sum, softmax_out, seed, offset)."""
    out, smax, ssum, softmax_out, seed, offset, _ = npu_fusion_attention(
        query, key, value, head_num, input_layout, pse, padding_mask, atten_mask, scale, keep_prob, pre_tockens,
        next_tockens, inner_precise, prefix, _lengths(actual_seq_qlen), _lengths(actual_seq_kvlen), sparse_mode,
        gen_mask_parallel, sync, softmax_layout, sink,
    )  # fmt: skip
    return out, smax, ssum, softmax_out, _as_tensor(seed, query), _as_tensor(offset, query)


def _fake(query, key, value, head_num, input_layout, *args, **kwargs):
    out, smax, ssum, softmax_out, *_ = fusion_attention_fake(query, key, value, head_num, input_layout)
    seed = query.new_empty(1, dtype=torch.int64)
    return out, smax, ssum, softmax_out, seed, torch.empty_like(seed)


def _setup(ctx, inputs, output, keyword_only_inputs=None):
    ctx.args = dict(zip(_NAMES, inputs))
    ctx.save_for_backward(output[0], output[1], output[2], output[4], output[5])


def _backward(ctx, dout, *unused):
    a = ctx.args
    out, smax, ssum, seed, offset = ctx.saved_tensors
    dq, dk, dv, dpse, dsink = torch.ops.npu.npu_fusion_attention_grad_v3(
        a["query"], a["key"], a["value"], dout, a["head_num"], a["input_layout"], pse=a["pse"],
        atten_mask=a["atten_mask"], softmax_max=smax, softmax_sum=ssum, attention_in=out, scale_value=a["scale"],
        keep_prob=a["keep_prob"], pre_tockens=a["pre_tockens"], next_tockens=a["next_tockens"], seed=seed,
        offset=offset, prefix=a["prefix"], actual_seq_qlen=a["actual_seq_qlen"],
        actual_seq_kvlen=a["actual_seq_kvlen"], sparse_mode=a["sparse_mode"], sink=a["sink"],
    )  # fmt: skip
    return input_grads(_NAMES, a, dq, dk, dv, dpse, dsink)


npu_op(
    "npu_fusion_attention_v3(Tensor query, Tensor key, Tensor value, int head_num, str input_layout, "
    "Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, float scale=1., float keep_prob=1., "
    "int pre_tockens=2147483647, int next_tockens=2147483647, int inner_precise=0, SymInt[]? prefix=None, "
    "Tensor? actual_seq_qlen=None, Tensor? actual_seq_kvlen=None, int sparse_mode=0, bool gen_mask_parallel=True, "
    'bool sync=False, str softmax_layout="", Tensor? sink=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)',
    fake=_fake,
    backward=_backward,
    setup_context=_setup,
)(npu_fusion_attention_v3)


def npu_fusion_attention_grad_v3(query, key, value, dy, head_num, input_layout, *, pse=None, padding_mask=None,
                                 atten_mask=None, softmax_max=None, softmax_sum=None, softmax_in=None,
                                 attention_in=None, scale_value=1.0, keep_prob=1.0, pre_tockens=_BIG,
                                 next_tockens=_BIG, inner_precise=0, seed=None, offset=None, prefix=None,
                                 actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0, gen_mask_parallel=True,
                                 sync=False, softmax_layout="", sink=None):  # fmt: skip
    """(dq, dk, dv, dpse, dsink); the dropout mask is regenerated from the seed tensor."""
    return npu_fusion_attention_grad(
        query, key, value, dy, head_num, input_layout, pse=pse, atten_mask=atten_mask, softmax_max=softmax_max,
        softmax_sum=softmax_sum, attention_in=attention_in, scale_value=scale_value, keep_prob=keep_prob,
        pre_tockens=pre_tockens, next_tockens=next_tockens, seed=0 if seed is None else int(seed.reshape(-1)[0]),
        prefix=prefix, actual_seq_qlen=_lengths(actual_seq_qlen), actual_seq_kvlen=_lengths(actual_seq_kvlen),
        sparse_mode=sparse_mode, sink=sink,
    )  # fmt: skip


def _grad_fake(query, key, value, dy, head_num, input_layout, *, pse=None, sink=None, **kwargs):
    empty = query.new_empty(0)
    return (torch.empty_like(query), torch.empty_like(key), torch.empty_like(value),
            empty if pse is None else torch.empty_like(pse), empty if sink is None else torch.empty_like(sink))  # fmt: skip


npu_op(
    "npu_fusion_attention_grad_v3(Tensor query, Tensor key, Tensor value, Tensor dy, int head_num, "
    "str input_layout, *, Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, "
    "Tensor? softmax_max=None, Tensor? softmax_sum=None, Tensor? softmax_in=None, Tensor? attention_in=None, "
    "float scale_value=1., float keep_prob=1., int pre_tockens=2147483647, int next_tockens=2147483647, "
    "int inner_precise=0, Tensor? seed=None, Tensor? offset=None, SymInt[]? prefix=None, "
    "Tensor? actual_seq_qlen=None, Tensor? actual_seq_kvlen=None, int sparse_mode=0, bool gen_mask_parallel=True, "
    'bool sync=False, str softmax_layout="", Tensor? sink=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor)',
    fake=_grad_fake,
)(npu_fusion_attention_grad_v3)
