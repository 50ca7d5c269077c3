"""The gradient operators torch_npu exposes by name next to forwards vnpu differentiates by autograd:
npu_layernorm_grad, npu_geglu_grad, npu_group_norm_swish_grad, npu_fused_attention_qkv_grad and the routing-map
permutation grads. Each returns the exact gradient of its forward's composition (computed in float32 where the
forward is, and rounded to the inputs' dtypes).

- npu_layernorm_grad: aten's native_layer_norm_backward from the saved mean / rstd: (d input, d weight, d bias).
- npu_geglu_grad: d self of npu_geglu's y for grad_output (the saved gelu output is not needed).
- npu_group_norm_swish_grad: (d input, d weight, d bias) of npu_group_norm_swish's out, those grad_input_mask
  selects (the others empty).
- npu_fused_attention_qkv_grad: the backward of three Linear projections y_i = hidden @ kernel_i^T + b_i (kernels
  as F.linear weights): [d hidden (+ grad_output_ln), d kernel_q, d kernel_k, d kernel_v, d b_q, d b_k, d b_v].
- npu_moe_token_permute_with_routing_map_grad: (d tokens [tokens_num, hidden], d probs [tokens_num, experts_num])
  of npu_moe_token_permute_with_routing_map's (permuted_tokens, permuted_probs).
- npu_moe_token_unpermute_with_routing_map_grad: (d permuted_tokens, d probs) of
  npu_moe_token_unpermute_with_routing_map's output (d probs empty without probs), from the maps
  _npu_moe_token_unpermute_with_routing_map returns: route i's row out_index[i] belongs to token
  permuted_token_id[i]. Without drop_and_pad out_index is sorted_indices; with it, sorted_indices[out_index[i]] =
  permuted_token_id[i].
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.activations import npu_geglu as geglu
from torch_npu.ops.moe_routing_map import npu_moe_token_permute_with_routing_map as permute_with_routing_map
from torch_npu.ops.moe_routing_map import npu_moe_token_unpermute_with_routing_map as unpermute_with_routing_map
from torch_npu.ops.norms import npu_group_norm_swish as group_norm_swish
from torch_npu.ops.registration import npu_op
from torch_npu.ops.vjp import recording_gradients

__all__ = []


def _grads(outputs, leaves, upstream):
    """torch.autograd.grad with zeros for leaves the outputs do not reach."""
    found = torch.autograd.grad(outputs, leaves, upstream, allow_unused=True)
    return [torch.zeros_like(leaf) if g is None else g for g, leaf in zip(found, leaves)]


@npu_op(
    "npu_layernorm_grad(Tensor grad_out, Tensor input, int[] normalized_shape, Tensor mean, Tensor rstd, "
    "Tensor? weight, Tensor? bias) -> (Tensor, Tensor, Tensor)",
    fake=lambda grad_out, input, normalized_shape, mean, rstd, weight, bias: (
        torch.empty_like(input),
        input.new_empty(0) if weight is None else torch.empty_like(weight),
        input.new_empty(0) if bias is None else torch.empty_like(bias),
    ),
)
def npu_layernorm_grad(grad_out, input, normalized_shape, mean, rstd, weight, bias):  # noqa: A002
    """(d input, d weight, d bias) of layer_norm from its saved statistics."""
    mask = [True, weight is not None, bias is not None]
    dx, dw, db = torch.ops.aten.native_layer_norm_backward(grad_out, input, list(normalized_shape), mean, rstd, weight, bias, mask)  # fmt: skip
    empty = input.new_empty(0)
    return dx, empty if dw is None else dw, empty if db is None else db


@npu_op(
    "npu_geglu_grad(Tensor grad_output, Tensor self, Tensor gelu, int dim=-1, int approximate=1, "
    "bool activate_left=False) -> Tensor",
    fake=lambda grad_output, x, gelu, *args, **kwargs: torch.empty_like(x),
)
def npu_geglu_grad(grad_output, x, gelu, dim=-1, approximate=1, activate_left=False):
    """d self of npu_geglu's first output."""
    leaf = x.detach().float().requires_grad_(True)
    with recording_gradients():
        y, _ = geglu(leaf, dim, approximate, activate_left)
        (dx,) = _grads(y, [leaf], grad_output.float())
    return dx.to(x.dtype)


def _gns_fake(grad, input, num_groups, weight, bias, mean, rstd, grad_input_mask, swish_scale=1.0):  # noqa: A002
    empty = input.new_empty(0)
    keep = list(grad_input_mask)
    return (torch.empty_like(input) if keep[0] else empty, torch.empty_like(weight) if keep[1] else empty,
            torch.empty_like(bias) if keep[2] else empty)  # fmt: skip


@npu_op(
    "npu_group_norm_swish_grad(Tensor grad, Tensor input, int num_groups, Tensor weight, Tensor bias, Tensor mean, "
    "Tensor rstd, bool[3] grad_input_mask, float? swish_scale=1.0) -> (Tensor, Tensor, Tensor)",
    fake=_gns_fake,
)
def npu_group_norm_swish_grad(grad, input, num_groups, weight, bias, mean, rstd, grad_input_mask, swish_scale=1.0):  # noqa: A002
    """(d input, d weight, d bias), the ones grad_input_mask selects."""
    leaves = [t.detach().float().requires_grad_(True) for t in (input, weight, bias)]
    with recording_gradients():
        out, _, _ = group_norm_swish(leaves[0], num_groups, leaves[1], leaves[2], 1e-5, 1.0 if swish_scale is None else swish_scale)  # fmt: skip
        grads = _grads(out, leaves, grad.float())
    empty = input.new_empty(0)
    return tuple(g.to(t.dtype) if keep else empty for g, t, keep in zip(grads, (input, weight, bias), grad_input_mask))


@npu_op(
    "npu_fused_attention_qkv_grad(Tensor grad_output_query, Tensor grad_output_key, Tensor grad_output_value, "
    "Tensor query_kernel, Tensor key_kernel, Tensor value_kernel, Tensor hidden_states, Tensor grad_output_ln) "
    "-> Tensor[]",
    fake=lambda gq, gk, gv, kq, kk, kv, hidden, gln: [
        torch.empty_like(hidden),
        torch.empty_like(kq),
        torch.empty_like(kk),
        torch.empty_like(kv),
        gq.new_empty(gq.shape[-1]),
        gk.new_empty(gk.shape[-1]),
        gv.new_empty(gv.shape[-1]),
    ],  # fmt: skip
)
def npu_fused_attention_qkv_grad(grad_output_query, grad_output_key, grad_output_value, query_kernel, key_kernel,
                                 value_kernel, hidden_states, grad_output_ln):  # fmt: skip
    """[d hidden_states, d query_kernel, d key_kernel, d value_kernel, d query_bias, d key_bias, d value_bias]."""
    op = "npu_fused_attention_qkv_grad"
    grads = (grad_output_query, grad_output_key, grad_output_value)
    kernels = (query_kernel, key_kernel, value_kernel)
    h = hidden_states.float()
    for name, g, k in zip(("query", "key", "value"), grads, kernels):
        check(g.dim() == 2 and g.shape[0] == h.shape[0] and tuple(k.shape) == (g.shape[1], h.shape[1]), op,
              f"grad_output_{name} [rows, out] and {name}_kernel [out, in] must fit hidden_states {tuple(h.shape)}")  # fmt: skip
    d_hidden = grad_output_ln.float() + sum(g.float() @ k.float() for g, k in zip(grads, kernels))
    d_kernels = [(g.float().t() @ h).to(k.dtype) for g, k in zip(grads, kernels)]
    d_biases = [g.float().sum(0).to(g.dtype) for g in grads]
    return [d_hidden.to(hidden_states.dtype), *d_kernels, *d_biases]


@npu_op(
    "npu_moe_token_permute_with_routing_map_grad(Tensor permuted_token_out_grad, Tensor? probs_grad, "
    "Tensor sorted_indices, Tensor routing_map, SymInt experts_num, SymInt tokens_num, bool drop_and_pad) "
    "-> (Tensor, Tensor)",
    fake=lambda g, pg, si, rm, experts_num, tokens_num, drop_and_pad: (
        g.new_empty(tokens_num, g.shape[1]),
        g.new_empty(0) if pg is None else pg.new_empty(tokens_num, experts_num),
    ),  # fmt: skip
)
def npu_moe_token_permute_with_routing_map_grad(permuted_token_out_grad, probs_grad, sorted_indices, routing_map,
                                                experts_num, tokens_num, drop_and_pad):  # fmt: skip
    """(d tokens, d probs (empty without probs_grad))."""
    op = "npu_moe_token_permute_with_routing_map_grad"
    check(tuple(routing_map.shape) == (tokens_num, experts_num), op,
          f"routing_map must be [tokens_num, experts_num] = [{tokens_num}, {experts_num}], got {tuple(routing_map.shape)}")  # fmt: skip
    tokens = torch.zeros(tokens_num, permuted_token_out_grad.shape[1], device=routing_map.device, requires_grad=True)
    probs = None if probs_grad is None else torch.zeros(tokens_num, experts_num, device=routing_map.device, requires_grad=True)  # fmt: skip
    with recording_gradients():
        permuted, permuted_probs, _ = permute_with_routing_map(tokens, routing_map, probs=probs,
                                                               num_out_tokens=permuted_token_out_grad.shape[0],
                                                               drop_and_pad=drop_and_pad)  # fmt: skip
        outputs, upstream, leaves = [permuted], [permuted_token_out_grad.float()], [tokens]
        if probs is not None:
            outputs.append(permuted_probs)
            upstream.append(probs_grad.float())
            leaves.append(probs)
        grads = _grads(outputs, leaves, upstream)
    d_probs = permuted_token_out_grad.new_empty(0) if probs is None else grads[1].to(probs_grad.dtype)
    return grads[0].to(permuted_token_out_grad.dtype), d_probs


@npu_op(
    "npu_moe_token_unpermute_with_routing_map_grad(Tensor unpermuted_tokens_grad, Tensor out_index, "
    "Tensor permuted_token_id, Tensor? routing_map, Tensor? permuted_tokens, Tensor? probs, bool drop_and_pad, "
    "int[] restore_shape) -> (Tensor, Tensor)",
    fake=lambda g, out_index, permuted_token_id, routing_map, permuted_tokens, probs, drop_and_pad, restore_shape: (
        g.new_empty(out_index.numel(), g.shape[1]),
        g.new_empty(0) if probs is None else torch.empty_like(probs),
    ),  # fmt: skip
)
def npu_moe_token_unpermute_with_routing_map_grad(unpermuted_tokens_grad, out_index, permuted_token_id, routing_map,
                                                  permuted_tokens, probs, drop_and_pad, restore_shape):  # fmt: skip
    """(d permuted_tokens [routes, hidden], d probs (empty without probs))."""
    hidden = unpermuted_tokens_grad.shape[1]
    sorted_indices = out_index
    if drop_and_pad:  # the token of each permuted row, from the sorted pairs
        sorted_indices = torch.empty_like(out_index).scatter_(
            0, out_index.long(), permuted_token_id.to(out_index.dtype)
        )
    values = permuted_tokens.float() if permuted_tokens is not None else torch.zeros(out_index.numel(), hidden, device=out_index.device)  # fmt: skip
    leaves = [values.detach().requires_grad_(True)]
    if probs is not None:
        leaves.append(probs.detach().float().requires_grad_(True))
    with recording_gradients():
        out = unpermute_with_routing_map(leaves[0], sorted_indices.int(), list(restore_shape),
                                         probs=leaves[1] if probs is not None else None, routing_map=routing_map,
                                         drop_and_pad=drop_and_pad)  # fmt: skip
        grads = _grads(out, leaves, unpermuted_tokens_grad.float())
    d_probs = unpermuted_tokens_grad.new_empty(0) if probs is None else grads[1].to(probs.dtype)
    return grads[0].to(unpermuted_tokens_grad.dtype), d_probs
