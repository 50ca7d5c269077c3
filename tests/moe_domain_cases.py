"""The cases of tests/distributed_worker.py for MoE dispatch / combine across both of their communication domains:
shared-expert ranks in the EP domain and the two-rank TP domain. The world's ranks are laid out as op-plugin's
tests lay them out (rank = ep rank * tp + tp rank); every rank writes out the rows it must receive and the tokens
it must get back from every rank's inputs, and compares bit for bit."""

import torch
import torch.distributed as dist
from distributed_rank import DEV, RANK, WORLD, same
from torch._subclasses.fake_tensor import FakeTensorMode

import torch_npu

# world size -> (ep_world_size, tp_world_size, shared-expert ranks, MoE experts)
_LAYOUTS = {4: (4, 0, 2, 4), 6: (3, 2, 1, 2)}
_BS, _K, _H = 5, 2, 8
_SHARED_FACTOR = 0.5


def _comm_names(ep, tp):
    """(group_ep, group_tp): the hccl names of this rank's EP and TP groups ("" without a TP domain)."""
    if tp < 2:
        return dist.group.WORLD._get_backend(DEV).get_hccl_comm_name(RANK), ""
    eps = [dist.new_group(list(range(t, WORLD, tp))) for t in range(tp)]
    tps = [dist.new_group(list(range(e * tp, (e + 1) * tp))) for e in range(ep)]
    e, t = divmod(RANK, tp)
    return tuple(g._get_backend(DEV).get_hccl_comm_name(RANK) for g in (eps[t], tps[e]))


def _inputs(rank, experts):
    g = torch.Generator().manual_seed(1200 + rank)
    ids = torch.stack([torch.randperm(experts, generator=g)[:_K] for _ in range(_BS)]).to(torch.int32)
    return torch.randn(_BS, _H, generator=g).to(torch.bfloat16), ids, torch.rand(_BS, _K, generator=g)


def _active(kind, rank):
    """x_active_mask of a rank: None, "tokens" (BS,) with its True values first -- rank 1 none --, or "routes"
    (BS, K) with token 0 taking no part."""
    if kind is None:
        return None
    if kind == "tokens":
        return torch.arange(_BS) < (0 if rank == 1 else _BS - 1 - rank % 2)
    mask = torch.rand(_BS, _K, generator=torch.Generator().manual_seed(1400 + rank)) < 0.6
    mask[0] = False
    return mask


def _takes_part(mask, tok, c=None):
    if mask is None:
        return True
    if mask.dim() == 1:
        return bool(mask[tok])
    return bool(mask[tok].any()) if c is None else bool(mask[tok, c])


def _expected_rows(members, e, shared, local, ids, whole_tokens, masks, shared_experts=1):
    """The (world rank, token, expert -- -1 - j for shared expert j) of each row EP rank e receives, in order;
    whole_tokens: the v2 kernels' rule (rank r's tokens to rank j * R + r % R of each shared expert j, R = S / n)
    instead of chunks; masks: each world rank's x_active_mask."""
    if e < shared and whole_tokens:
        per_expert = shared // shared_experts
        rows = [(members[q], tok, -1 - e // per_expert) for q in range(len(members)) if q % per_expert == e % per_expert for tok in range(_BS)]  # fmt: skip
        return [(q, tok, ex) for q, tok, ex in rows if _takes_part(masks[q], tok)]
    if e < shared:
        rows = [(members[e], tok, -1) for tok in range(_BS)]
        for r in range(shared, len(members)):  # MoE rank r's chunk e of its tokens
            base = r * _BS // shared
            lo, hi = (r + e) * _BS // shared - base, (r + e + 1) * _BS // shared - base
            rows += [(members[r], tok, -1) for tok in range(lo, hi)]
        return rows
    rows = []
    for expert in range((e - shared) * local, (e - shared + 1) * local):
        for q in members:
            rows += [(q, tok, expert) for tok in range(_BS) for c in range(_K) if int(ids[q][tok, c]) == expert and _takes_part(masks[q], tok, c)]  # fmt: skip
    return rows


def _processed(x, factor, tp):
    """What the TP ranks' experts make of row x (rank u scales by factor + u), reduced over the TP domain."""
    versions = [(x.float() * (factor + u)).to(torch.bfloat16).float() for u in range(max(tp, 1))]
    return sum(versions[1:], versions[0]).to(torch.bfloat16)


def _dispatch_and_combine(dispatch, combine, whole_tokens, mask_kind=None, shared_experts=1):
    """One family's dispatch rows, counts, fake shapes and int8 form, and its combine's tokens."""
    ep, tp, shared, experts = _LAYOUTS[WORLD]
    local, every = experts // (ep - shared), max(tp, 1)
    e, t = divmod(RANK, every)
    xs, ids, weights = zip(*[_inputs(r, experts) for r in range(WORLD)])
    group_ep, group_tp = _comm_names(ep, tp)
    args = (group_ep, ep, e, experts)
    domain = dict(group_tp=group_tp, tp_world_size=tp, tp_rank_id=t, shared_expert_rank_num=shared,
                  shared_expert_num=shared_experts)  # fmt: skip
    masks = [_active(mask_kind, r) for r in range(WORLD)]
    if mask_kind is not None:
        domain["x_active_mask"] = masks[RANK].to(DEV)
    real = xs[RANK].to(DEV), ids[RANK].to(DEV)
    out = dispatch(*real, *args, **domain)
    expand_x, _, expand_idx, token_nums, recv_counts, tp_recv_counts, _ = out
    per_group = [_expected_rows(list(range(u, WORLD, every)), e, shared, local, ids, whole_tokens, masks, shared_experts) for u in range(every)]  # fmt: skip
    rows = per_group[t] + [r for u in range(every) if u != t for r in per_group[u]]
    a = _BS * ep * shared_experts // shared if e < shared else _BS * ep * min(local, _K)
    assert expand_x.shape == (a * every, _H), expand_x.shape
    if rows:
        same(expand_x[: len(rows)], torch.stack([xs[q][tok] for q, tok, _ in rows]))
    assert not expand_x[len(rows) :].cpu().any()
    if tp == 2:
        same(tp_recv_counts, torch.tensor([len(g) for g in per_group], dtype=torch.int32))
    if e < shared:
        same(token_nums, torch.tensor([len(rows)]))
    with FakeTensorMode() as mode:  # what torch.compile sees: the same shapes and dtypes on every rank kind
        fake_domain = {name: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v for name, v in domain.items()}
        fake = dispatch(*map(mode.from_tensor, real), *args, **fake_domain)
    assert [(f.shape, f.dtype) for f in fake] == [(r.shape, r.dtype) for r in out], (fake, out)

    factors = torch.tensor([_SHARED_FACTOR - 1 - ex if ex < 0 else ex + 1.0 for _, _, ex in rows])  # expert j: 0.5 + j
    processed = expand_x.clone()
    processed[: len(rows)] = (expand_x[: len(rows)].float() * (factors + t).to(DEV)[:, None]).to(torch.bfloat16)
    combined = combine(
        processed, real[1], expand_idx, recv_counts, weights[RANK].to(DEV), *args,
        tp_send_counts=tp_recv_counts, **domain,
    )  # fmt: skip
    x, mask, zero = xs[RANK], masks[RANK], torch.zeros(_H, dtype=torch.bfloat16)
    routed = torch.stack([torch.stack([_processed(x[tok], float(ids[RANK][tok, c]) + 1, tp) if _takes_part(mask, tok, c) else zero for c in range(_K)]) for tok in range(_BS)])  # fmt: skip
    want = (routed.float() * weights[RANK][:, :, None]).sum(1)
    if shared:
        for j in range(shared_experts):  # each shared expert's output, in expert order
            want = want + torch.stack([_processed(x[tok], _SHARED_FACTOR + j, tp) if _takes_part(mask, tok) else zero for tok in range(_BS)]).float()  # fmt: skip
    want[[not _takes_part(mask, tok) for tok in range(_BS)]] = 0  # a token taking no part: zeros
    same(combined, want.to(torch.bfloat16))
    if mask_kind is not None:
        return

    smooth = torch.rand(shared_experts + experts, _H, generator=torch.Generator().manual_seed(1300)) + 0.5
    q, scales = dispatch(*real, *args, scales=smooth.to(DEV), quant_mode=2, **domain)[:2]
    smoothed = torch.stack([xs[w][tok].float() * smooth[-1 - ex if ex < 0 else ex + shared_experts] for w, tok, ex in rows])  # fmt: skip
    factor = 127.0 / smoothed.abs().amax(-1, keepdim=True)  # the card's: rint(x * 127 / max), scale 1 / factor
    same(q[: len(rows)], torch.round(smoothed * factor).to(torch.int8))
    same(scales[: len(rows)], (1.0 / factor).squeeze(-1))


def case_moe_distribute_domains():
    """Dispatch's rows, counts and int8 form, and combine's tokens, with shared-expert ranks and the TP domain:
    the first operators cut each MoE rank's tokens among the shared ranks, the v2 family sends them whole."""
    _dispatch_and_combine(torch_npu.npu_moe_distribute_dispatch, torch_npu.npu_moe_distribute_combine, False)
    v2 = (torch_npu.npu_moe_distribute_dispatch_v2, torch_npu.npu_moe_distribute_combine_v2)
    _dispatch_and_combine(*v2, True)
    if _LAYOUTS[WORLD][2] == 2:  # two shared experts on one rank each: every token goes to both
        _dispatch_and_combine(*v2, True, shared_experts=2)
    if _LAYOUTS[WORLD][1] == 2:
        _refusals_on_the_groups()


def case_moe_distribute_active_masks():
    """The v2 family with x_active_mask: padding tokens at the end of a batch (one rank sending none), and single
    routes switched off (a token with none left): nothing of theirs is sent, and combine gives them zeros."""
    for kind in ("tokens", "routes"):
        v2 = (torch_npu.npu_moe_distribute_dispatch_v2, torch_npu.npu_moe_distribute_combine_v2)
        _dispatch_and_combine(*v2, True, kind)


def _raises(call, message):
    try:
        call()
    except RuntimeError as error:
        assert str(error).splitlines()[0] == message, (str(error).splitlines()[0], message)
    else:
        raise AssertionError(f"no error: {message}")


def _refusals_on_the_groups():
    """With EP 3 x TP 2: rank ids that differ from the groups', and combine's TP and EP counts, refused by name on
    every rank before anything is exchanged over the EP group."""
    ep, tp, shared, experts = _LAYOUTS[WORLD]
    e, t = divmod(RANK, tp)
    group_ep, group_tp = _comm_names(ep, tp)
    x, ids, weights = (v.to(DEV) for v in _inputs(RANK, experts))
    domain = dict(group_tp=group_tp, tp_world_size=tp, shared_expert_rank_num=shared)
    dispatch, combine = torch_npu.npu_moe_distribute_dispatch, torch_npu.npu_moe_distribute_combine
    _raises(lambda: dispatch(x, ids, group_ep, ep, (e + 1) % ep, experts, tp_rank_id=t, **domain),
            f"npu_moe_distribute_dispatch: ep_world_size / ep_rank_id ({ep}, {(e + 1) % ep}) differ from the group's ({ep}, {e})")  # fmt: skip
    _raises(lambda: dispatch(x, ids, group_ep, ep, e, experts, tp_rank_id=1 - t, **domain),
            f"npu_moe_distribute_dispatch: tp_world_size / tp_rank_id (2, {1 - t}) differ from the group's (2, {t})")  # fmt: skip
    expand_x, _, expand_idx, _, recv_counts, tp_recv_counts, _ = dispatch(x, ids, group_ep, ep, e, experts, tp_rank_id=t, **domain)  # fmt: skip
    args = (expand_x, ids, expand_idx, recv_counts, weights, group_ep, ep, e, experts)
    _raises(
        lambda: combine(*args, tp_rank_id=t, **domain),
        "npu_moe_distribute_combine: tp_send_counts (dispatch's tp_recv_counts) is required with the TP domain",
    )
    big = torch.tensor([10**4, 10**4], dtype=torch.int32, device=DEV)
    _raises(lambda: combine(*args, tp_send_counts=big, tp_rank_id=t, **domain),
            f"npu_moe_distribute_combine: tp_send_counts [10000, 10000] address more rows than expand_x has ({expand_x.shape[0]})")  # fmt: skip
    elastic = torch.tensor([1, ep, shared, experts, *range(ep), *range(ep)], dtype=torch.int32, device=DEV)
    _raises(lambda: torch_npu.npu_moe_distribute_dispatch_v2(x, ids, group_ep, ep, e, experts, tp_rank_id=t, elastic_info=elastic, **domain),  # fmt: skip
            "npu_moe_distribute_dispatch_v2: elastic_info cannot scale the EP domain in with a TP domain (the card does not either)")  # fmt: skip
    _raises(lambda: combine(*args, tp_send_counts=tp_recv_counts, tp_rank_id=t, comm_quant_mode=2, **domain),
            "npu_moe_distribute_combine: comm_quant_mode 2 (int8 communication) is taken only without a TP domain (tp_world_size < 2)")  # fmt: skip
    too_many = recv_counts + 10**4
    _raises(lambda: combine(expand_x, ids, expand_idx, too_many, weights, group_ep, ep, e, experts, tp_send_counts=tp_recv_counts, tp_rank_id=t, **domain),
            f"npu_moe_distribute_combine: ep_send_counts address {int(too_many[recv_counts.numel() // tp - 1])} rows, more than expand_x holds for this rank ({int(tp_recv_counts[t])})")  # fmt: skip


def _special_inputs(rank, experts, specials):
    g = torch.Generator().manual_seed(1500 + rank)
    ids = torch.stack([torch.randperm(experts + specials, generator=g)[:3] for _ in range(_BS)]).to(torch.int32)
    return torch.randn(_BS, _H, generator=g).to(torch.bfloat16), ids, torch.rand(_BS, 3, generator=g)


def _route_output(x, e, experts, consts):
    """What route to expert e gives for token x: the test's expert e scales by e + 1 (in bfloat16, as the rows came
    back); the special experts after the MoE experts here are one zero, one copy and two const experts."""
    if e < experts:
        return (x.float() * (e + 1)).to(torch.bfloat16).float()
    if e == experts:
        return torch.zeros(x.shape[0])
    if e == experts + 1:
        return x.float()
    alpha_1, alpha_2, const_v = consts
    c = e - experts - 2
    return alpha_1[c].float() * x.float() + alpha_2[c].float() * const_v[c].float()


def case_moe_distribute_special_experts():
    """The v2 family's zero / copy / const experts (ids after the MoE experts): routes to them are never sent, and
    combine adds 0, ori_x, or alpha_1[c] * ori_x + alpha_2[c] * v[c], weighted as any route; a route x_active_mask
    switches off adds nothing; ids past the last special expert and missing const inputs are refused."""
    experts, counts = 2 * WORLD, dict(zero_expert_num=1, copy_expert_num=1, const_expert_num=2)
    hcom = dist.group.WORLD._get_backend(DEV).get_hccl_comm_name(RANK)
    args = (hcom, WORLD, RANK, experts)
    xs, ids, weights = zip(*[_special_inputs(r, experts, 4) for r in range(WORLD)])
    g = torch.Generator().manual_seed(1600)
    alpha_1, alpha_2 = (torch.rand(2, generator=g).to(torch.bfloat16) for _ in range(2))
    const_v = torch.randn(2, _H, generator=g).to(torch.bfloat16)
    mask = torch.ones(_BS, 3, dtype=torch.bool)
    mask[0, :] = False  # token 0 takes no part
    mask[1, ids[RANK][1] >= experts] = False  # token 1's special routes are switched off
    for x_active_mask in (None, mask):
        extra = {} if x_active_mask is None else {"x_active_mask": x_active_mask.to(DEV)}
        masks = [x_active_mask if r == RANK else None for r in range(WORLD)]
        out = torch_npu.npu_moe_distribute_dispatch_v2(xs[RANK].to(DEV), ids[RANK].to(DEV), *args, **counts, **extra)
        expand_x, _, assist, _, recv_counts, _, _ = out
        sent = [(q, tok) for j in range(2) for q in range(WORLD) for tok in range(_BS) for c in range(3)
                if int(ids[q][tok, c]) == RANK * 2 + j and (masks[q] is None or bool(masks[q][tok, c]))]  # fmt: skip
        if x_active_mask is None:  # the other ranks' masks are theirs: only the unmasked call is checked row by row
            same(expand_x[: len(sent)], torch.stack([xs[q][tok] for q, tok in sent]))
            assert not expand_x[len(sent) :].cpu().any()
        rows = expand_x.clone()
        local = (recv_counts.cpu().diff(prepend=torch.zeros(1, dtype=torch.int32)).reshape(2, WORLD).sum(1)).tolist()
        factor = torch.cat([torch.full((n,), RANK * 2 + j + 1.0) for j, n in enumerate(local)])
        rows[: factor.numel()] = (expand_x[: factor.numel()].float() * factor.to(DEV)[:, None]).to(torch.bfloat16)
        specials = dict(ori_x=xs[RANK].to(DEV), const_expert_alpha_1=alpha_1.to(DEV), const_expert_alpha_2=alpha_2.to(DEV),
                        const_expert_v=const_v.to(DEV), **counts, **extra)  # fmt: skip
        combined = torch_npu.npu_moe_distribute_combine_v2(rows, ids[RANK].to(DEV), assist, recv_counts, weights[RANK].to(DEV), *args, **specials)  # fmt: skip
        consts = (alpha_1, alpha_2, const_v)
        per_route = torch.stack([torch.stack([_route_output(xs[RANK][tok], int(ids[RANK][tok, c]), experts, consts) if x_active_mask is None or bool(x_active_mask[tok, c]) else torch.zeros(_H) for c in range(3)]) for tok in range(_BS)])  # fmt: skip
        want = (per_route * weights[RANK].reshape(_BS, 3, 1)).sum(1)
        if x_active_mask is not None:
            want[0] = 0
        same(combined, want.to(torch.bfloat16))
        residual, gamma = torch.randn(_BS, _H).to(torch.bfloat16), torch.rand(_H).to(torch.bfloat16)
        _, _, summed = torch_npu.npu_moe_distribute_combine_add_rms_norm(
            rows, ids[RANK].to(DEV), assist, recv_counts, weights[RANK].to(DEV), residual.to(DEV), gamma.to(DEV), *args, **specials)  # fmt: skip
        same(summed, (combined.cpu().float() + residual.float()).to(torch.bfloat16))
    beyond = ids[RANK].clone()
    beyond[0, 0] = experts + 4
    _raises(lambda: torch_npu.npu_moe_distribute_dispatch_v2(xs[RANK].to(DEV), beyond.to(DEV), *args, **counts),
            f"npu_moe_distribute_dispatch_v2: expert_ids must lie in [0, {experts + 4}) (moe_expert_num + zero_expert_num + copy_expert_num + const_expert_num)")  # fmt: skip
    no_v = dict(ori_x=xs[RANK].to(DEV), const_expert_alpha_1=alpha_1.to(DEV), const_expert_alpha_2=alpha_2.to(DEV), **counts)  # fmt: skip
    _raises(
        lambda: torch_npu.npu_moe_distribute_combine_v2(
            rows, ids[RANK].to(DEV), assist, recv_counts, weights[RANK].to(DEV), *args, **no_v
        ),  # fmt: skip
        "npu_moe_distribute_combine_v2: const_expert_v must be (2, 8) with const_expert_num 2, got None",
    )
    _raises(
        lambda: torch_npu.npu_moe_distribute_combine_v2(
            rows, ids[RANK].to(DEV), assist, recv_counts, weights[RANK].to(DEV), *args, **counts
        ),  # fmt: skip
        "npu_moe_distribute_combine_v2: ori_x is required with copy_expert_num or const_expert_num",
    )
    wrong_x = dict(no_v, ori_x=xs[RANK][:, :4].to(DEV), const_expert_v=const_v.to(DEV))
    _raises(lambda: torch_npu.npu_moe_distribute_combine_v2(rows, ids[RANK].to(DEV), assist, recv_counts, weights[RANK].to(DEV), *args, **wrong_x),  # fmt: skip
            f"npu_moe_distribute_combine_v2: ori_x must be ({_BS}, {_H}) in torch.bfloat16, got ({_BS}, 4) in torch.bfloat16")  # fmt: skip


def _elastic_info(live, shared_after, experts_after):
    """elastic_info for the live world ranks (in that order): [1, live, shared, experts, table 1, table 2]."""
    table1 = [live.index(r) if r in live else -1 for r in range(WORLD)]
    table2 = live + [-1] * (WORLD - len(live))
    return torch.tensor([1, len(live), shared_after, experts_after, *table1, *table2], dtype=torch.int32)


def case_moe_distribute_elastic():
    """The v2 family with elastic_info: the EP domain shrinks to the live ranks (a dropped rank never calls), each
    keeping its experts per rank and its role; the rows each live rank receives and the tokens combine gives back
    equal the routing over the live ranks written out, at the card's shapes for ep_world_size; a dropped rank, a
    table that changes a rank's role, and a table with another expert count are refused before any exchange."""
    dispatch, combine = torch_npu.npu_moe_distribute_dispatch_v2, torch_npu.npu_moe_distribute_combine_v2
    hcom = dist.group.WORLD._get_backend(DEV).get_hccl_comm_name(RANK)
    for shared, local, dropped in ((0, 2, 2), (1, 1, 3)):
        dist.barrier()  # the rank dropped from the first round starts the second with the others
        experts = local * (WORLD - shared)
        live = [r for r in range(WORLD) if r != dropped]
        after = local * (len(live) - shared)
        info = _elastic_info(live, shared, after).to(DEV)
        args = (hcom, WORLD, RANK, experts)
        domain = dict(shared_expert_rank_num=shared, elastic_info=info)
        xs, ids, weights = zip(*[_inputs(r, after) for r in range(WORLD)])
        real = xs[RANK].to(DEV), ids[RANK].to(DEV)
        if RANK == dropped:
            _raises(lambda real=real, args=args, domain=domain: dispatch(*real, *args, **domain),
                    f"npu_moe_distribute_dispatch_v2: rank {RANK} is not among elastic_info's live ranks {live}")  # fmt: skip
            continue
        me = live.index(RANK)
        expand_x, _, assist, token_nums, recv_counts, _, _ = out = dispatch(*real, *args, **domain)
        rows = _expected_rows(live, me, shared, local, ids, True, [None] * WORLD)
        a = max(_BS * WORLD // shared if shared else 0, _BS * WORLD * min(local, _K))
        assert expand_x.shape == (a, _H) and recv_counts.shape == (WORLD * (1 if me < shared else local),), out
        same(expand_x[: len(rows)], torch.stack([xs[q][tok] for q, tok, _ in rows]))
        assert not expand_x[len(rows) :].cpu().any()
        same(token_nums.sum(), torch.tensor(len(rows)))
        with FakeTensorMode() as mode:
            fake = dispatch(*map(mode.from_tensor, real), *args, shared_expert_rank_num=shared, elastic_info=mode.from_tensor(info))  # fmt: skip
        assert [(f.shape, f.dtype) for f in fake] == [(r.shape, r.dtype) for r in out], (fake, out)
        factors = torch.tensor([_SHARED_FACTOR if ex < 0 else ex + 1.0 for _, _, ex in rows])
        processed = expand_x.clone()
        processed[: len(rows)] = (expand_x[: len(rows)].float() * factors.to(DEV)[:, None]).to(torch.bfloat16)
        combined = combine(processed, real[1], assist, recv_counts, weights[RANK].to(DEV), *args, **domain)
        x = xs[RANK]
        routed = torch.stack([torch.stack([_processed(x[tok], float(ids[RANK][tok, c]) + 1, 1) for c in range(_K)]) for tok in range(_BS)])  # fmt: skip
        want = (routed.float() * weights[RANK][:, :, None]).sum(1)
        if shared:
            want = want + torch.stack([_processed(x[tok], _SHARED_FACTOR, 1) for tok in range(_BS)]).float()
        same(combined, want.to(torch.bfloat16))
    x, ids = (v.to(DEV) for v in _inputs(RANK, 2 * WORLD)[:2])
    everyone = list(range(WORLD))
    if RANK == 0:  # the check fails on this rank only: it raises before any exchange
        _raises(
            lambda: dispatch(
                x,
                ids,
                hcom,
                WORLD,
                0,
                WORLD - 1,
                shared_expert_rank_num=1,
                elastic_info=_elastic_info(everyone, 0, WORLD).to(DEV),
            ),  # fmt: skip
            "npu_moe_distribute_dispatch_v2: elastic_info makes EP rank 0 a MoE rank: vnpu keeps each rank's role",
        )
    _raises(lambda: combine(x, ids, ids.reshape(-1), ids.reshape(-1), ids.float(), hcom, WORLD, RANK, 2 * WORLD, elastic_info=_elastic_info(everyone, 0, 6).to(DEV)),  # fmt: skip
            f"npu_moe_distribute_combine_v2: elastic_info's MoE experts (6) must keep 2 per MoE rank on the {WORLD} live MoE ranks")  # fmt: skip
    swapped = _elastic_info(everyone, 0, 2 * WORLD)
    swapped[4], swapped[5] = 1, 0  # table 1 sends EP ranks 0 and 1 to each other's places, table 2 does not
    _raises(lambda: dispatch(x, ids, hcom, WORLD, RANK, 2 * WORLD, elastic_info=swapped.to(DEV)),
            f"npu_moe_distribute_dispatch_v2: elastic_info's tables disagree: live rank -> EP rank {everyone}, EP rank -> live rank {[1, 0, *range(2, WORLD)]}")  # fmt: skip
    nobody = _elastic_info(everyone, 0, 2 * WORLD)
    nobody[1] = 0
    _raises(lambda: dispatch(x, ids, hcom, WORLD, RANK, 2 * WORLD, elastic_info=nobody.to(DEV)),
            f"npu_moe_distribute_dispatch_v2: elastic_info's live ranks (0) and shared-expert ranks (0) must satisfy 0 <= shared < live <= ep_world_size ({WORLD})")  # fmt: skip
    short = _elastic_info(everyone, 0, 2 * WORLD)[:-1]
    _raises(lambda: dispatch(x, ids, hcom, WORLD, RANK, 2 * WORLD, elastic_info=short.to(DEV)),
            f"npu_moe_distribute_dispatch_v2: elastic_info must hold 4 + 2 * world_size = {4 + 2 * WORLD} values, got {3 + 2 * WORLD}")  # fmt: skip
