"""npu_moe_distribute_dispatch / _combine (+ _v2, combine_add_rms_norm): expert-parallel MoE token dispatch and
combine over the hccl group named `group_ep` (MoeDistributeDispatch / MoeDistributeCombine).

Experts are spread evenly over the MoE ranks (the ranks after the shared-expert ranks; those and the TP domain are
described in moe_distribute_domains): with E_l local experts per MoE rank, expert e is local expert e % E_l of its
rank. Dispatch sends every route (token t, choice k) to its expert's rank; rank q's expand_x [A, H] holds the rows it
received grouped by local expert, then by source rank, then in the source's token order (A = BS * ep_world_size *
min(E_l, K), or global_bs * min(E_l, K); rows past the received ones are zero). quant_mode 2 quantises each row
dynamically to int8 as the card does (rint(x * scales[expert] * 127 / max |.|), dynamic_scales [A] the inverse
factor; with shared-expert ranks row 0 of scales is the shared expert's, row e + 1 expert e's); 0 sends x as is.
expert_token_nums: the rows per local expert (counts, or cumulative with expert_token_nums_type 0); ep_recv_counts:
the cumulative rows per (local expert, source rank), which combine takes as ep_send_counts; expand_idx [BS * K]: for
each route, how many of this rank's earlier routes (in (t, k) order) go to the same expert (combine's input; the card
documents it as internal, op-plugin's golden test checks these values); expand_scales: expert_scales exchanged with
the rows ([A]).

Combine returns every expert row to the rank its token came from and sums the K rows of each token weighted by
expert_scales, in float32, in expand_x's dtype (plus shared_expert_x when given). combine_add_rms_norm then
adds residual_x and RmsNorms the sum with gamma: (y, rstd, x).

The v2 family takes x_active_mask: (BS,) with its True values first masks tokens, (BS, K) single routes; what takes
no part is not sent, and combine gives zeros for a token taking no part. It also takes the special experts, numbered
after the MoE experts: zero_expert_num zero experts, then copy_expert_num copy experts, then const_expert_num const
experts. A route to one is never sent; combine computes its output on the token's own rank -- 0, ori_x, or
const_expert_alpha_1[c] * ori_x + const_expert_alpha_2[c] * const_expert_v[c] for const expert c, in float32 -- and
weights it with expert_scales as any other route.

The v2 family also takes elastic_info (elastic scaling: the EP domain shrunk to its live ranks, see
moe_distribute_domains). Every combine takes comm_quant_mode 2 (without a TP domain): the expert rows travel as
int8 with one scale per 8 elements (comm_int8_round_trip). The setup / teardown operators refuse it.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.moe_distribute_domains import (
    Domains,
    elastic_rows,
    exchange,
    own_first,
    resolve,
    tp_all_gather,
    tp_reduce_scatter,
)
from torch_npu.ops.registration import npu_op

__all__ = []


def active_routes(x_active_mask, expert_ids, op):
    """(routes [BS * K], tokens [BS]): which take part, or (None, None) when all do. x_active_mask (BS,), its True
    values first, masks tokens; (BS, K) masks single routes, and a token with no route left takes no part."""
    if x_active_mask is None:
        return None, None
    bs, k = expert_ids.shape
    check(x_active_mask.dtype == torch.bool and tuple(x_active_mask.shape) in ((bs,), (bs, k)), op,
          f"x_active_mask must be a bool tensor of shape (BS,) or (BS, K) = ({bs},) or ({bs}, {k}), got {x_active_mask.dtype} {tuple(x_active_mask.shape)}")  # fmt: skip
    if x_active_mask.dim() == 2:
        return x_active_mask.reshape(-1), x_active_mask.any(1)
    check(bool(x_active_mask[: int(x_active_mask.sum())].all()), op, "x_active_mask of shape (BS,) must hold its True values before its False values")  # fmt: skip
    return x_active_mask.repeat_interleave(k), x_active_mask


def special_routes(expert_ids, active, moe_expert_num, counts, op):
    """(active routes without those to special experts, [BS * K] routes to special experts taking part or None).
    counts: (zero_expert_num, copy_expert_num, const_expert_num); the special experts' ids follow the MoE experts'."""
    if not any(counts):
        return active, None
    routes, tokens = active
    flat = expert_ids.reshape(-1).long()
    last = moe_expert_num + sum(counts)
    valid = (flat >= 0) & (flat < last)
    check(bool((valid if routes is None else valid | ~routes).all()), op, f"expert_ids must lie in [0, {last}) (moe_expert_num + zero_expert_num + copy_expert_num + const_expert_num)")  # fmt: skip
    special = flat >= moe_expert_num
    taking = special if routes is None else special & routes
    return ((~special if routes is None else routes & ~special), tokens), taking


def special_outputs(expert_ids, taking, moe_expert_num, counts, ori_x, alphas, const_v, like, op):
    """(taking, float32 outputs [n, H] of its routes): 0 (zero experts), ori_x (copy experts), alpha_1[c] * ori_x +
    alpha_2[c] * v[c] (const expert c), or None without special routes."""
    if taking is None:
        return None
    zero, copy, const = counts
    bs, k = expert_ids.shape
    h = like.shape[1]
    check(not (copy or const) or ori_x is not None, op, "ori_x is required with copy_expert_num or const_expert_num")
    if ori_x is not None:
        check(tuple(ori_x.shape) == (bs, h) and ori_x.dtype == like.dtype, op, f"ori_x must be ({bs}, {h}) in {like.dtype}, got {tuple(ori_x.shape)} in {ori_x.dtype}")  # fmt: skip
    if const:
        for name, t, shape in (("const_expert_alpha_1", alphas[0], (const,)), ("const_expert_alpha_2", alphas[1], (const,)), ("const_expert_v", const_v, (const, h))):  # fmt: skip
            check(t is not None and tuple(t.shape) == shape, op, f"{name} must be {shape} with const_expert_num {const}, got {None if t is None else tuple(t.shape)}")  # fmt: skip
    where = taking.nonzero().squeeze(1)
    expert = expert_ids.reshape(-1).long()[where] - moe_expert_num
    token = where // k
    rows = like.new_zeros(where.numel(), h, dtype=torch.float32)
    copies = (expert >= zero) & (expert < zero + copy)
    if bool(copies.any()):
        rows[copies] = ori_x[token[copies]].float()
    consts = expert >= zero + copy
    if bool(consts.any()):
        c = expert[consts] - zero - copy
        x = ori_x[token[consts]].float()
        rows[consts] = alphas[0].float()[c, None] * x + alphas[1].float()[c, None] * const_v.float()[c]
    return taking, rows


def _routed_ids(expert_ids, routes, moe_expert_num):
    """Each route's expert, moe_expert_num for a route that takes no part (it sorts after every expert's)."""
    flat = expert_ids.reshape(-1).long()
    return flat if routes is None else torch.where(routes, flat, moe_expert_num)


def route_plan(expert_ids, world, moe_expert_num, op, shared=0, routes=None):
    """(send order of the routes -- those taking part first --, routes per destination rank, rows per (rank, local
    expert) [world, E_l]); the first `shared` ranks hold no MoE expert."""
    check(moe_expert_num % (world - shared) == 0, op, f"moe_expert_num ({moe_expert_num}) must be a multiple of ep_world_size - shared_expert_rank_num ({world - shared})")  # fmt: skip
    flat = _routed_ids(expert_ids, routes, moe_expert_num)
    valid = (flat >= 0) & (flat < moe_expert_num)
    check(bool((valid if routes is None else valid | ~routes).all()), op, f"expert_ids must lie in [0, {moe_expert_num})")  # fmt: skip
    order = torch.argsort(flat, stable=True)  # experts are rank-major: this is (rank, local expert, route) order
    per_expert = torch.bincount(flat, minlength=moe_expert_num + 1)[:moe_expert_num].reshape(world - shared, moe_expert_num // (world - shared))  # fmt: skip
    per_expert = torch.cat([per_expert.new_zeros(shared, per_expert.shape[1]), per_expert])
    return order, per_expert.sum(1), per_expert


def _expert_starts(flat, moe_expert_num):
    """Where each expert's routes begin in the send order (routes sorted by expert, in (t, k) order within one)."""
    counts = torch.bincount(flat, minlength=moe_expert_num + 1)
    return counts.cumsum(0) - counts


def route_index(expert_ids, order, moe_expert_num, routes=None):
    """expand_idx: for each route, how many of this rank's earlier routes go to the same expert."""
    flat = _routed_ids(expert_ids, routes, moe_expert_num)
    return (torch.argsort(order) - _expert_starts(flat, moe_expert_num)[flat]).to(torch.int32)


def send_positions(expert_ids, expand_idx, moe_expert_num, routes=None):
    """Each route's place in the send order, from expand_idx."""
    flat = _routed_ids(expert_ids, routes, moe_expert_num)
    return _expert_starts(flat, moe_expert_num)[flat] + expand_idx.reshape(-1).long()


def transposed_blocks(rows, counts):
    """rows laid out in blocks (a, b) of counts[a, b] rows, a-major -> the same blocks b-major."""
    blocks, start = {}, 0
    outer, inner = counts.shape
    for a in range(outer):
        for b in range(inner):
            blocks[a, b] = rows[start : start + int(counts[a, b])]
            start += int(counts[a, b])
    return torch.cat([blocks[a, b] for b in range(inner) for a in range(outer)]) if blocks else rows[:0]


def refuse_unsupported(op, extra=()):
    for name, value in extra:
        check(not value, op, f"{name} is not computed by vnpu")


def dynamic_int8(rows):
    """The card's per-row dynamic int8 quantisation (MoeDistributeDispatch): s = 127 / max |row| in float32, the
    values rint(row * s) and the row's dequantisation scale 1 / s (an all-zero row: values 0, scale 0). It multiplies
    where npu_dynamic_quant's symmetric_dynamic divides by max / 127, as their kernels do."""
    scale = 127.0 / rows.abs().amax(-1, keepdim=True)
    values = torch.where(torch.isinf(scale), 0.0, torch.round(rows * scale)).clamp(-128, 127).to(torch.int8)
    return values, (1.0 / scale).squeeze(-1)


_COMM_GROUP = 8  # elements sharing one scale in combine's int8 communication (a 32-byte block of float32)


def comm_int8_round_trip(rows):
    """rows as combine's int8 communication (comm_quant_mode 2) delivers them: each group of 8 elements of a row is
    sent as int8 values rint(half(x / s)) with the scale s = max |x| * (1 / 127) (float32) sent in the rows' dtype;
    the receiver multiplies in float32 and rounds to the rows' dtype. An all-zero group stays zero."""
    n, h = rows.shape
    groups = torch.nn.functional.pad(rows.float(), (0, (-h) % _COMM_GROUP)).reshape(n, -1, _COMM_GROUP)
    scale = groups.abs().amax(-1, keepdim=True) * torch.tensor(1.0 / 127.0, dtype=torch.float32)
    ratio = torch.where(scale > 0, groups / scale, 0.0)
    values = ratio.to(torch.float16).float().round().clamp(-128, 127)
    back = values * scale.to(rows.dtype).float()
    return back.reshape(n, -1)[:, :h].to(rows.dtype)


def check_comm_quant(comm_quant_mode, domains, op):
    """True for int8 communication (comm_quant_mode 2), False for none (0); the card takes it without a TP domain."""
    check(comm_quant_mode in (0, 2), op, f"comm_quant_mode must be 0 (none) or 2 (int8), got {comm_quant_mode}")
    check(comm_quant_mode == 0 or domains.tp_group is None, op, "comm_quant_mode 2 (int8 communication) is taken only without a TP domain (tp_world_size < 2)")  # fmt: skip
    return comm_quant_mode == 2


def _quantised(values, scale_rows, scales, total, x):
    """quant_mode 2: each row, smoothed by its expert's row of `scales`, as int8 with its float32 scale."""
    smoothed = values * scales.float()[scale_rows] if scales is not None else values
    expand_x = x.new_zeros(total, x.shape[1], dtype=torch.int8)
    dynamic_scales = x.new_zeros(total, dtype=torch.float32)
    expand_x[: values.shape[0]], dynamic_scales[: values.shape[0]] = dynamic_int8(smoothed)
    return expand_x, dynamic_scales


def _dispatch(x, expert_ids, domains, scales, expert_scales, quant_mode, global_bs, expert_token_nums_type, op,
              active=(None, None)):  # fmt: skip
    check(x.dim() == 2 and expert_ids.dim() == 2 and expert_ids.shape[0] == x.shape[0], op,
          f"x must be [BS, H] and expert_ids [BS, K], got {tuple(x.shape)} and {tuple(expert_ids.shape)}")  # fmt: skip
    check(quant_mode in (0, 2), op, f"quant_mode must be 0 (none) or 2 (dynamic), got {quant_mode}")
    d = domains
    bs, k = expert_ids.shape
    routes, tokens = active  # active_routes'
    full_order, per_rank, per_expert = route_plan(expert_ids, d.world, d.moe_expert_num, op, d.shared, routes)
    order = full_order[: int(per_rank.sum())]  # the routes taking part
    shared_x = x if tokens is None else x[tokens]
    shared_rows = torch.tensor(d.shared_chunks(bs, shared_x.shape[0]), dtype=per_expert.dtype, device=per_expert.device)  # fmt: skip
    sending = per_expert.clone()
    sending[:, 0] += shared_rows  # a shared rank's one expert is its column 0
    counts = torch.empty_like(sending.reshape(-1))
    exchange(d, counts, sending.reshape(-1).contiguous())  # [source, local expert]
    received = counts.reshape(d.world, d.local)[:, : d.rank_local]
    shared_experts = d.shared_experts if d.shared else 0
    experts = expert_ids.reshape(-1)[order].float() + shared_experts  # the row of `scales` of each route
    weights = expert_scales.reshape(-1)[order].float() if expert_scales is not None else torch.zeros(order.numel(), device=x.device)  # fmt: skip
    payload = torch.cat([x[order // k].float(), weights[:, None], experts[:, None]], 1)
    if d.shared:  # the tokens for the shared experts go first (shared ranks come first in rank order), expert j's
        blocks = [torch.cat([shared_x.float(), shared_x.new_zeros(shared_x.shape[0], 1, dtype=torch.float32),  # weight
                             shared_x.new_full((shared_x.shape[0], 1), j, dtype=torch.float32)], 1)  # row of scales
                  for j in range(shared_experts)]  # fmt: skip
        payload = torch.cat([*blocks, payload])
    got = payload.new_empty(int(received.sum()), payload.shape[1])
    exchange(d, got, payload, received.sum(1).tolist(), (per_rank + shared_rows).tolist())
    arranged = transposed_blocks(got, received)  # (source, local expert) -> (local expert, source)
    total = d.rows(bs, k, global_bs)
    check(arranged.shape[0] <= total, op, f"this rank received {arranged.shape[0]} rows, more than A = {total}: pass global_bs")  # fmt: skip
    recv_counts = received.t().reshape(-1).cumsum(0).to(torch.int32)  # (local expert, source rank)
    tp_recv_counts = x.new_zeros(1, dtype=torch.int32)
    if d.tp_group is not None:
        arranged, every = tp_all_gather(arranged, received, d)
        recv_counts = torch.cat(own_first([c.t().reshape(-1).cumsum(0) for c in every], d.tp_rank)).to(torch.int32)
        tp_recv_counts = every.reshape(every.shape[0], -1).sum(1).to(torch.int32).to(x.device)
        received, total = every.sum(0), total * every.shape[0]
    values, scale_rows = arranged[:, :-2], arranged[:, -1].long()
    expand_scales = x.new_zeros(total, dtype=torch.float32)
    expand_scales[: arranged.shape[0]] = arranged[:, -2]
    if quant_mode == 2:
        expand_x, dynamic_scales = _quantised(values, scale_rows, scales, total, x)
    else:
        expand_x = x.new_zeros(total, x.shape[1])
        expand_x[: values.shape[0]] = values.to(x.dtype)
        dynamic_scales = x.new_empty(0, dtype=torch.float32)
    if d.elastic_rows is not None:  # ep_world_size-long, the live ranks' counts first
        recv_counts = torch.cat([recv_counts, recv_counts[-1:].expand(d.rank_local * (d.elastic_rows[0] - d.world))])
    per_local = received.sum(0)
    expert_token_nums = (per_local if expert_token_nums_type == 1 else per_local.cumsum(0)).to(torch.int64)
    expand_idx = route_index(expert_ids, full_order, d.moe_expert_num, routes)
    return expand_x, dynamic_scales, expand_idx, expert_token_nums, recv_counts, tp_recv_counts, expand_scales


def _combine(expand_x, expert_ids, expand_idx, ep_send_counts, expert_scales, domains, shared_expert_x,
             tp_send_counts, op, active=(None, None), specials=None, comm_int8=False):  # fmt: skip
    """[BS, H]; a token taking no part (active: active_routes') gets zeros; specials: special_outputs'; comm_int8:
    the rows sent back travel as combine's int8 communication does (comm_int8_round_trip)."""
    d = domains
    bs, k = expert_ids.shape
    routes, tokens = active
    _, per_rank, _ = route_plan(expert_ids, d.world, d.moe_expert_num, op, d.shared, routes)
    cumulative = ep_send_counts.reshape(-1)[: d.rank_local * d.world].long()
    counts = torch.diff(cumulative, prepend=cumulative.new_zeros(1)).reshape(d.rank_local, d.world)
    rows = tp_reduce_scatter(expand_x, tp_send_counts, d, op) if d.tp_group is not None else expand_x
    check(int(counts.sum()) <= rows.shape[0], op, f"ep_send_counts address {int(counts.sum())} rows, more than expand_x holds for this rank ({rows.shape[0]})")  # fmt: skip
    back = transposed_blocks(rows, counts)  # (local expert, source) -> (source, local expert)
    if comm_int8:
        back = comm_int8_round_trip(back)
    shared_rows = d.shared_chunks(bs, bs if tokens is None else int(tokens.sum()))
    got = back.new_empty(int(per_rank.sum()) + sum(shared_rows), expand_x.shape[1])
    exchange(d, got, back.contiguous(), [a + b for a, b in zip(per_rank.tolist(), shared_rows)], counts.sum(0).tolist())  # fmt: skip
    shared_out, routed = got[: sum(shared_rows)], got[sum(shared_rows) :]
    positions = send_positions(expert_ids, expand_idx, d.moe_expert_num, routes)
    if routes is None:
        per_route = routed[positions]
    else:  # a route taking no part adds an exact zero
        per_route = routed.new_zeros(bs * k, routed.shape[1])
        per_route[routes] = routed[positions[routes]]
    if specials is not None:  # the special experts' outputs, computed here
        per_route = per_route.float()
        per_route[specials[0]] = specials[1]
    out = (per_route.float().reshape(bs, k, -1) * expert_scales.float().reshape(bs, k, 1)).sum(1)  # (t, k) order
    for block in shared_out.split(shared_out.shape[0] // d.shared_experts) if d.shared else ():  # in expert order
        out = out + (block if tokens is None else block.new_zeros(bs, block.shape[1]).index_put_((tokens,), block)).float()  # fmt: skip
    if shared_expert_x is not None:
        out = out + shared_expert_x.reshape(out.shape).float()
    if tokens is not None:
        out = out.masked_fill(~tokens[:, None], 0.0)
    return out.to(expand_x.dtype)


_DISPATCH_OUT = "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)"


_DOMAIN_ARGS = ("shared_expert_rank_num", "shared_expert_num", "expert_shard_type", "group_tp", "tp_world_size", "tp_rank_id")  # fmt: skip


_V2_FAMILY = ("npu_moe_distribute_dispatch_v2", "npu_moe_distribute_combine_v2", "npu_moe_distribute_combine_add_rms_norm")  # fmt: skip


def _domains(op, args):
    """The Domains of a call, from its arguments (every operator here names them as the card's schema does)."""
    check(args.get("shared_expert_x") is None or not args["shared_expert_rank_num"], op,
          "shared_expert_x is taken only without shared-expert ranks (shared_expert_rank_num 0): those ranks compute the shared expert")  # fmt: skip
    return resolve(op, args["group_ep"], args["ep_world_size"], args["ep_rank_id"], args["moe_expert_num"],
                   **{name: args[name] for name in _DOMAIN_ARGS}, v2=op in _V2_FAMILY,
                   elastic_info=args.get("elastic_info"))  # fmt: skip


def _dispatch_fake(x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *, quant_mode=0,
                   global_bs=0, shared_expert_rank_num=0, shared_expert_num=1, tp_world_size=0, **kwargs):  # fmt: skip
    bs, k = expert_ids.shape
    rows = None
    if kwargs.get("elastic_info") is not None:
        rows = elastic_rows(ep_world_size, shared_expert_rank_num, moe_expert_num)
    layout = Domains(ep_world_size, ep_rank_id, moe_expert_num, shared_expert_rank_num, group=None,
                     shared_experts=shared_expert_num if shared_expert_rank_num else 1, elastic_rows=rows)  # fmt: skip
    tp = 2 if tp_world_size == 2 else 1
    total = layout.rows(bs, k, global_bs) * tp
    dtype = torch.int8 if quant_mode == 2 else x.dtype
    scales = x.new_empty(total if quant_mode == 2 else 0, dtype=torch.float32)
    return (x.new_empty(total, x.shape[1], dtype=dtype), scales, x.new_empty(bs * k, dtype=torch.int32),
            x.new_empty(layout.rank_local, dtype=torch.int64),
            x.new_empty(ep_world_size * layout.rank_local * tp, dtype=torch.int32),
            x.new_empty(tp, dtype=torch.int32), x.new_empty(total, dtype=torch.float32))  # fmt: skip


@npu_op(
    "npu_moe_distribute_dispatch(Tensor x, Tensor expert_ids, str group_ep, int ep_world_size, int ep_rank_id, "
    "int moe_expert_num, *, Tensor? scales=None, Tensor? x_active_mask=None, Tensor? expert_scales=None, "
    'str group_tp="", int tp_world_size=0, int tp_rank_id=0, int expert_shard_type=0, int shared_expert_num=1, '
    "int shared_expert_rank_num=0, int quant_mode=0, int global_bs=0, int expert_token_nums_type=1) " + _DISPATCH_OUT,
    fake=_dispatch_fake,
)
def npu_moe_distribute_dispatch(x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *, scales=None,
                                x_active_mask=None, expert_scales=None, group_tp="", tp_world_size=0, tp_rank_id=0,
                                expert_shard_type=0, shared_expert_num=1, shared_expert_rank_num=0, quant_mode=0,
                                global_bs=0, expert_token_nums_type=1):  # fmt: skip
    """(expand_x, dynamic_scales, expand_idx, expert_token_nums, ep_recv_counts, tp_recv_counts, expand_scales)."""
    op = "npu_moe_distribute_dispatch"
    refuse_unsupported(op, [("x_active_mask (the v2 operators take it)", x_active_mask is not None)])
    domains = _domains(op, locals())
    return _dispatch(x, expert_ids, domains, scales, expert_scales, quant_mode, global_bs, expert_token_nums_type, op)


@npu_op(
    "npu_moe_distribute_dispatch_v2(Tensor x, Tensor expert_ids, str group_ep, int ep_world_size, int ep_rank_id, "
    "int moe_expert_num, *, Tensor? scales=None, Tensor? x_active_mask=None, Tensor? expert_scales=None, "
    'Tensor? elastic_info=None, Tensor? performance_info=None, str group_tp="", int tp_world_size=0, '
    "int tp_rank_id=0, int expert_shard_type=0, int shared_expert_num=1, int shared_expert_rank_num=0, "
    'int quant_mode=0, int global_bs=0, int expert_token_nums_type=1, str comm_alg="", int zero_expert_num=0, '
    "int copy_expert_num=0, int const_expert_num=0, int? y_dtype=None, int? x_dtype=None, int? scales_dtype=None) "
    + _DISPATCH_OUT,
    fake=_dispatch_fake,
)
def npu_moe_distribute_dispatch_v2(x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *,
                                   scales=None, x_active_mask=None, expert_scales=None, elastic_info=None,
                                   performance_info=None, group_tp="", tp_world_size=0, tp_rank_id=0,
                                   expert_shard_type=0, shared_expert_num=1, shared_expert_rank_num=0, quant_mode=0,
                                   global_bs=0, expert_token_nums_type=1, comm_alg="", zero_expert_num=0,
                                   copy_expert_num=0, const_expert_num=0, y_dtype=None, x_dtype=None,
                                   scales_dtype=None):  # fmt: skip
    """(expand_x, dynamic_scales, assist_info_for_combine, expert_token_nums, ep_recv_counts, tp_recv_counts,
    expand_scales)."""
    op = "npu_moe_distribute_dispatch_v2"
    counts = (zero_expert_num, copy_expert_num, const_expert_num)
    active, _ = special_routes(expert_ids, active_routes(x_active_mask, expert_ids, op), moe_expert_num, counts, op)
    domains = _domains(op, locals())
    return _dispatch(x, expert_ids, domains, scales, expert_scales, quant_mode, global_bs, expert_token_nums_type, op,
                     active)  # fmt: skip


def _combine_fake(expand_x, expert_ids, *args, **kwargs):
    return expand_x.new_empty(expert_ids.shape[0], expand_x.shape[1])


@npu_op(
    "npu_moe_distribute_combine(Tensor expand_x, Tensor expert_ids, Tensor expand_idx, Tensor ep_send_counts, "
    "Tensor expert_scales, str group_ep, int ep_world_size, int ep_rank_id, int moe_expert_num, *, "
    "Tensor? tp_send_counts=None, Tensor? x_active_mask=None, Tensor? activation_scale=None, "
    "Tensor? weight_scale=None, Tensor? group_list=None, Tensor? expand_scales=None, Tensor? shared_expert_x=None, "
    'str group_tp="", int tp_world_size=0, int tp_rank_id=0, int expert_shard_type=0, int shared_expert_num=1, '
    "int shared_expert_rank_num=0, int global_bs=0, int out_dtype=0, int comm_quant_mode=0, "
    "int group_list_type=0) -> Tensor",
    fake=_combine_fake,
)
def npu_moe_distribute_combine(expand_x, expert_ids, expand_idx, ep_send_counts, expert_scales, group_ep,
                               ep_world_size, ep_rank_id, moe_expert_num, *, tp_send_counts=None, x_active_mask=None,
                               activation_scale=None, weight_scale=None, group_list=None, expand_scales=None,
                               shared_expert_x=None, group_tp="", tp_world_size=0, tp_rank_id=0, expert_shard_type=0,
                               shared_expert_num=1, shared_expert_rank_num=0, global_bs=0, out_dtype=0,
                               comm_quant_mode=0, group_list_type=0):  # fmt: skip
    """[BS, H]: each token's expert rows back from their ranks, summed with expert_scales."""
    op = "npu_moe_distribute_combine"
    unsupported = [("activation_scale / weight_scale (int32 expand_x)", activation_scale is not None or weight_scale is not None),
                   ("x_active_mask (the v2 operators take it)", x_active_mask is not None)]  # fmt: skip
    refuse_unsupported(op, unsupported)
    domains = _domains(op, locals())
    comm_int8 = check_comm_quant(comm_quant_mode, domains, op)
    return _combine(expand_x, expert_ids, expand_idx, ep_send_counts, expert_scales, domains, shared_expert_x,
                    tp_send_counts, op, comm_int8=comm_int8)  # fmt: skip


@npu_op(
    "npu_moe_distribute_combine_v2(Tensor expand_x, Tensor expert_ids, Tensor assist_info_for_combine, "
    "Tensor ep_send_counts, Tensor expert_scales, str group_ep, int ep_world_size, int ep_rank_id, "
    "int moe_expert_num, *, Tensor? tp_send_counts=None, Tensor? x_active_mask=None, Tensor? expand_scales=None, "
    "Tensor? shared_expert_x=None, Tensor? elastic_info=None, Tensor? ori_x=None, Tensor? const_expert_alpha_1=None, "
    "Tensor? const_expert_alpha_2=None, Tensor? const_expert_v=None, Tensor? performance_info=None, "
    'str group_tp="", int tp_world_size=0, int tp_rank_id=0, int expert_shard_type=0, int shared_expert_num=1, '
    'int shared_expert_rank_num=0, int global_bs=0, int comm_quant_mode=0, str comm_alg="", int zero_expert_num=0, '
    "int copy_expert_num=0, int const_expert_num=0) -> Tensor",
    fake=_combine_fake,
)
def npu_moe_distribute_combine_v2(expand_x, expert_ids, assist_info_for_combine, ep_send_counts, expert_scales,
                                  group_ep, ep_world_size, ep_rank_id, moe_expert_num, *, tp_send_counts=None,
                                  x_active_mask=None, expand_scales=None, shared_expert_x=None, elastic_info=None,
                                  ori_x=None, const_expert_alpha_1=None, const_expert_alpha_2=None,
                                  const_expert_v=None, performance_info=None, group_tp="", tp_world_size=0,
                                  tp_rank_id=0, expert_shard_type=0, shared_expert_num=1, shared_expert_rank_num=0,
                                  global_bs=0, comm_quant_mode=0, comm_alg="", zero_expert_num=0, copy_expert_num=0,
                                  const_expert_num=0):  # fmt: skip
    """[BS, H], as npu_moe_distribute_combine."""
    return _v2_combine("npu_moe_distribute_combine_v2", locals(), assist_info_for_combine)


def _v2_combine(op, args, expand_idx):
    """The combine of the v2 family (combine_v2, combine_add_rms_norm) from a call's arguments: x_active_mask, the
    special experts, the domains (elastic_info) and comm_quant_mode, then _combine."""
    expert_ids, expand_x = args["expert_ids"], args["expand_x"]
    counts = (args["zero_expert_num"], args["copy_expert_num"], args["const_expert_num"])
    active = active_routes(args["x_active_mask"], expert_ids, op)
    active, taking = special_routes(expert_ids, active, args["moe_expert_num"], counts, op)
    alphas = (args["const_expert_alpha_1"], args["const_expert_alpha_2"])
    specials = special_outputs(expert_ids, taking, args["moe_expert_num"], counts, args["ori_x"], alphas,
                               args["const_expert_v"], expand_x, op)  # fmt: skip
    domains = _domains(op, args)
    comm_int8 = check_comm_quant(args["comm_quant_mode"], domains, op)
    return _combine(expand_x, expert_ids, expand_idx, args["ep_send_counts"], args["expert_scales"], domains,
                    args["shared_expert_x"], args["tp_send_counts"], op, active, specials, comm_int8)  # fmt: skip


def _add_rms_norm_fake(expand_x, expert_ids, expand_idx, ep_send_counts, expert_scales, residual_x, gamma, *a, **k):
    x = residual_x.new_empty(residual_x.shape)
    return torch.empty_like(x), x.new_empty(*x.shape[:-1], 1, dtype=torch.float32), torch.empty_like(x)


@npu_op(
    "npu_moe_distribute_combine_add_rms_norm(Tensor expand_x, Tensor expert_ids, Tensor expand_idx, "
    "Tensor ep_send_counts, Tensor expert_scales, Tensor residual_x, Tensor gamma, str group_ep, int ep_world_size, "
    "int ep_rank_id, int moe_expert_num, *, Tensor? tp_send_counts=None, Tensor? x_active_mask=None, "
    "Tensor? activation_scale=None, Tensor? weight_scale=None, Tensor? group_list=None, Tensor? expand_scales=None, "
    "Tensor? shared_expert_x=None, Tensor? elastic_info=None, Tensor? ori_x=None, Tensor? const_expert_alpha_1=None, "
    'Tensor? const_expert_alpha_2=None, Tensor? const_expert_v=None, str group_tp="", int tp_world_size=0, '
    "int tp_rank_id=0, int expert_shard_type=0, int shared_expert_num=1, int shared_expert_rank_num=0, "
    'int global_bs=0, int out_dtype=0, int comm_quant_mode=0, int group_list_type=0, str comm_alg="", '
    "float norm_eps=1e-06, int zero_expert_num=0, int copy_expert_num=0, int const_expert_num=0) "
    "-> (Tensor, Tensor, Tensor)",
    fake=_add_rms_norm_fake,
)
def npu_moe_distribute_combine_add_rms_norm(expand_x, expert_ids, expand_idx, ep_send_counts, expert_scales,
                                            residual_x, gamma, group_ep, ep_world_size, ep_rank_id, moe_expert_num,
                                            *, tp_send_counts=None, shared_expert_x=None, group_tp="",
                                            tp_world_size=0, tp_rank_id=0, expert_shard_type=0, shared_expert_num=1,
                                            shared_expert_rank_num=0, comm_quant_mode=0, elastic_info=None, norm_eps=1e-6,
                                            zero_expert_num=0, copy_expert_num=0, const_expert_num=0, x_active_mask=None,
                                            activation_scale=None, weight_scale=None, ori_x=None,
                                            const_expert_alpha_1=None, const_expert_alpha_2=None, const_expert_v=None,
                                            **unused):  # fmt: skip
    """(y, rstd, x): x = combine + residual_x, y = RmsNorm(x) * gamma."""
    op = "npu_moe_distribute_combine_add_rms_norm"
    unsupported = [("activation_scale / weight_scale (int32 expand_x)", activation_scale is not None or weight_scale is not None)]  # fmt: skip
    refuse_unsupported(op, unsupported)
    combined = _v2_combine(op, locals(), expand_idx)
    x = (combined.float() + residual_x.reshape(combined.shape).float()).to(residual_x.dtype)
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + norm_eps)
    y = (xf * rstd * gamma.float()).to(residual_x.dtype)
    return y.reshape(residual_x.shape), rstd.reshape(*residual_x.shape[:-1], 1), x.reshape(residual_x.shape)
