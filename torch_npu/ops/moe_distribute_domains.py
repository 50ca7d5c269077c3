"""The two communication domains of MoE dispatch / combine (MoeDistributeDispatch / MoeDistributeCombine).

EP domain. With S = shared_expert_rank_num (expert_shard_type 0: the shared-expert ranks come first), ranks 0 .. S-1
hold the shared expert and ranks S .. ep_world_size-1 hold E_l = moe_expert_num / (ep_world_size - S) MoE experts
each: expert e lives on rank S + e // E_l. Every rank sends its routes to the MoE ranks, and its BS tokens to the
shared expert, as each kernel does:
- npu_moe_distribute_dispatch (MoeDistributeDispatch): a MoE rank r cuts its tokens into S contiguous chunks, chunk
  s = tokens [floor((r + s) BS / S) - floor(r BS / S), floor((r + s + 1) BS / S) - floor(r BS / S)) going to shared
  rank s; a shared rank keeps its own tokens;
- the v2 family (MoeDistributeDispatchV2, and the combines paired with it): with n = shared_expert_num shared
  experts, each on R = S / n ranks, rank r sends all its tokens to each shared expert j, at rank j * R + r % R (its
  place in that expert's group of ranks); row j of `scales` smooths what goes to shared expert j, row n + e expert e.
A shared rank's rows are its sources' tokens in source rank order, its own first with one shared expert (A = BS *
ep_world_size * n / S rows); its ep_recv_counts count its own rows at its own rank. Combine sends each shared row back
to its token, and the shared experts' outputs are added to the token's weighted expert sum unweighted, in expert order.

Elastic scaling (elastic_info, the v2 family): [is_elastic, live ranks, shared-expert ranks, MoE experts after the
scale-in, then table 1 (EP rank -> live rank or -1) and table 2 (live rank -> EP rank), each ep_world_size long]. The
live ranks form the EP domain in table 2's order (a dropped rank never calls) and exchange point to point over the
group; each keeps its experts per rank and its role (vnpu refuses a table that turns a shared-expert rank into a MoE
rank or back, which would change its outputs' shapes). With elastic_info given, A is the larger of the shared and
the MoE ranks' A over the whole ep_world_size (the card's rule) and ep_recv_counts keeps its ep_world_size-long
layout, the live ranks' counts first.

TP domain (tp_world_size 2, one expert per MoE rank). Dispatch all-gathers the two ranks' rows after the EP
exchange: expand_x holds this rank's rows, then its partner's (2 * A rows); ep_recv_counts the two ranks' cumulative
counts in the same order; tp_recv_counts the rows of each TP rank, by TP rank. Combine reduce-scatters: each rank's
rows are the sum of both ranks' versions of them, added in TP rank order in float32 and rounded once.
"""

from dataclasses import dataclass, replace

import torch
import torch.distributed as dist

from torch_npu.ops._common import check
from torch_npu.ops.matmul_collectives import process_group

__all__ = []


@dataclass(frozen=True)
class Domains:
    world: int
    rank: int
    moe_expert_num: int
    shared: int  # shared-expert ranks, S
    group: object  # the EP process group
    tp_group: object = None  # the TP process group, None without TP communication
    tp_rank: int = 0
    whole_tokens_to_shared: bool = False  # the v2 kernels' rule: all of rank r's tokens to shared rank r % S
    shared_experts: int = 1  # the v2 family's shared experts, each on S / shared_experts ranks
    members: tuple = None  # elastic scaling: the EP group ranks of the live ranks, by live rank
    elastic_rows: tuple = None  # with elastic_info: (ep_world_size, shared_expert_rank_num, MoE experts per rank)

    @property
    def local(self):
        """MoE experts per MoE rank."""
        return self.moe_expert_num // (self.world - self.shared)

    @property
    def is_shared(self):
        return self.rank < self.shared

    @property
    def rank_local(self):
        """Experts on this rank: one on a shared rank."""
        return 1 if self.is_shared else self.local

    def shared_chunks(self, bs, active=None):
        """Rows of this rank's BS tokens (`active` of them taking part) going to each EP rank's shared expert
        ([world]; zero for MoE ranks)."""
        counts = [0] * self.world
        if self.whole_tokens_to_shared and self.shared:  # to each shared expert j: its rank j * R + r % R
            ranks_per_expert = self.shared // self.shared_experts
            for j in range(self.shared_experts):
                counts[j * ranks_per_expert + self.rank % ranks_per_expert] = bs if active is None else active
        elif self.is_shared:
            counts[self.rank] = bs
        else:
            for s in range(self.shared):
                counts[s] = (self.rank + s + 1) * bs // self.shared - (self.rank + s) * bs // self.shared
        return counts

    def rows(self, bs, k, global_bs):
        """A: the rows this rank can receive from its EP domain."""
        if self.elastic_rows is not None:  # the card's rule with elastic_info: the larger of the two kinds' A
            world, shared, local = self.elastic_rows
            total = global_bs if global_bs else bs * world
            return max(total * self.shared_experts // shared if shared else 0, total * min(local, k))
        total = global_bs if global_bs else bs * self.world
        return total * self.shared_experts // self.shared if self.is_shared else total * min(self.local, k)


def elastic_table(elastic_info, world_size, op):
    """(is_elastic, live ranks, shared-expert ranks, MoE experts, table 1 [world], table 2 [world]) of elastic_info."""
    info = [int(v) for v in elastic_info.reshape(-1).tolist()]
    check(len(info) == 4 + 2 * world_size, op,
          f"elastic_info must hold 4 + 2 * world_size = {4 + 2 * world_size} values, got {len(info)}")  # fmt: skip
    return bool(info[0]), info[1], info[2], info[3], info[4 : 4 + world_size], info[4 + world_size :]


def exchange(domains, output, inp, output_sizes=None, input_sizes=None):
    """all_to_all_single over the EP domain: over the whole group, or point to point among the live ranks."""
    if domains.members is None:
        dist.all_to_all_single(output, inp, output_sizes, input_sizes, group=domains.group)
        return
    n = domains.world
    outs = output.split(output_sizes or [output.shape[0] // n] * n)
    ins = inp.split(input_sizes or [inp.shape[0] // n] * n)
    ops = []
    for q, member in enumerate(domains.members):
        if q == domains.rank:
            outs[q].copy_(ins[q])
            continue
        if outs[q].numel():
            ops.append(dist.P2POp(dist.irecv, outs[q], group=domains.group, group_peer=member))
        if ins[q].numel():
            ops.append(dist.P2POp(dist.isend, ins[q].contiguous(), group=domains.group, group_peer=member))
    for work in dist.batch_isend_irecv(ops) if ops else ():
        work.wait()


def sized_group(name, world, rank, what, op):
    """The process group named `name`, checked to have `world` ranks with this one at `rank`."""
    group = process_group(name, op)
    check(dist.get_world_size(group) == world and dist.get_rank(group) == rank, op,
          f"{what}_world_size / {what}_rank_id ({world}, {rank}) differ from the group's ({dist.get_world_size(group)}, {dist.get_rank(group)})")  # fmt: skip
    return group


def check_layout(op, ep_world_size, moe_expert_num, shared_expert_rank_num, shared_expert_num=1, expert_shard_type=0,
                 tp_world_size=0, v2=False):  # fmt: skip
    """The attribute rules of the card, before any communication (v2: the v2 family's)."""
    shared = shared_expert_rank_num
    check(0 <= shared < ep_world_size, op, f"shared_expert_rank_num must lie in [0, ep_world_size={ep_world_size}), got {shared}")  # fmt: skip
    check(shared == 0 or ep_world_size % shared == 0, op, f"ep_world_size ({ep_world_size}) must be a multiple of shared_expert_rank_num ({shared})")  # fmt: skip
    if v2 and shared:  # the card takes 1 to 4 shared experts, each on shared_expert_rank_num / shared_expert_num ranks
        check(0 < shared_expert_num <= 4 and shared % shared_expert_num == 0, op,
              f"shared_expert_num must lie in [1, 4] and divide shared_expert_rank_num ({shared}), got {shared_expert_num}")  # fmt: skip
    check(v2 or shared == 0 or shared_expert_num == 1, op, f"shared_expert_num must be 1 with shared-expert ranks, got {shared_expert_num}")  # fmt: skip
    check(expert_shard_type == 0, op, f"expert_shard_type must be 0 (shared-expert ranks first), got {expert_shard_type}")  # fmt: skip
    moe_ranks = ep_world_size - shared
    check(moe_expert_num > 0 and moe_expert_num % moe_ranks == 0, op,
          f"moe_expert_num ({moe_expert_num}) must be a positive multiple of ep_world_size - shared_expert_rank_num ({moe_ranks})")  # fmt: skip
    check(tp_world_size in (0, 1, 2), op, f"tp_world_size must be 0, 1 (no TP domain) or 2, got {tp_world_size}")
    check(tp_world_size < 2 or moe_expert_num == moe_ranks, op,
          f"the TP domain needs one expert per MoE rank, got {moe_expert_num // moe_ranks} (moe_expert_num {moe_expert_num} on {moe_ranks} MoE ranks)")  # fmt: skip


def elastic_rows(ep_world_size, shared_expert_rank_num, moe_expert_num):
    """Domains.elastic_rows of a call given elastic_info: what the card's rule for A reads."""
    return ep_world_size, shared_expert_rank_num, moe_expert_num // (ep_world_size - shared_expert_rank_num)


def _elastic(op, elastic_info, layout):
    """(Domains fields of the live EP domain, elastic_rows) for a call given elastic_info (see the module doc)."""
    world, rank, moe_expert_num, shared, tp_world_size = layout
    rows = elastic_rows(world, shared, moe_expert_num)
    local = rows[2]
    is_elastic, live, shared_after, experts_after, table1, table2 = elastic_table(elastic_info, world, op)
    if not is_elastic:
        return {}, rows
    check(tp_world_size < 2, op, "elastic_info cannot scale the EP domain in with a TP domain (the card does not either)")  # fmt: skip
    check(0 < live <= world and 0 <= shared_after < live, op, f"elastic_info's live ranks ({live}) and shared-expert ranks ({shared_after}) must satisfy 0 <= shared < live <= ep_world_size ({world})")  # fmt: skip
    members = table2[:live]
    check(sorted(members) == sorted(set(members)) and all(0 <= m < world and table1[m] == i for i, m in enumerate(members)), op, f"elastic_info's tables disagree: live rank -> EP rank {members}, EP rank -> live rank {table1}")  # fmt: skip
    check(rank in members, op, f"rank {rank} is not among elastic_info's live ranks {sorted(members)}")
    me = table1[rank]
    check((me < shared_after) == (rank < shared), op, f"elastic_info makes EP rank {rank} a {'shared-expert' if me < shared_after else 'MoE'} rank: vnpu keeps each rank's role")  # fmt: skip
    check(experts_after == local * (live - shared_after), op, f"elastic_info's MoE experts ({experts_after}) must keep {local} per MoE rank on the {live - shared_after} live MoE ranks")  # fmt: skip
    fields = dict(world=live, rank=me, moe_expert_num=experts_after, shared=shared_after, members=tuple(members))
    return fields, rows


def resolve(op, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *, shared_expert_rank_num=0, shared_expert_num=1,
            expert_shard_type=0, group_tp="", tp_world_size=0, tp_rank_id=0, v2=False, elastic_info=None):  # fmt: skip
    """The Domains of one call (v2: an operator of the v2 family): its attributes checked, its process groups found;
    elastic_info (the v2 family) shrinks the EP domain to its live ranks."""
    check_layout(op, ep_world_size, moe_expert_num, shared_expert_rank_num, shared_expert_num, expert_shard_type,
                 tp_world_size, v2)  # fmt: skip
    tp_group = None
    if tp_world_size == 2:
        check(group_tp != group_ep, op, f"group_tp must name another communicator than group_ep, both are {group_ep!r}")  # fmt: skip
        tp_group = sized_group(group_tp, tp_world_size, tp_rank_id, "tp", op)
    group = sized_group(group_ep, ep_world_size, ep_rank_id, "ep", op)
    shared_experts = shared_expert_num if v2 and shared_expert_rank_num else 1
    domains = Domains(ep_world_size, ep_rank_id, moe_expert_num, shared_expert_rank_num, group, tp_group, tp_rank_id,
                      v2, shared_experts)  # fmt: skip
    if elastic_info is None:
        return domains
    layout = (ep_world_size, ep_rank_id, moe_expert_num, shared_expert_rank_num, tp_world_size)
    fields, rows = _elastic(op, elastic_info, layout)
    return replace(domains, elastic_rows=rows, **fields)


def own_first(items, me):
    """items of every TP rank, in the order a rank lays them out: its own, then the others' in TP rank order."""
    return [items[me]] + [item for q, item in enumerate(items) if q != me]


def tp_all_gather(rows, counts, domains):
    """(rows of every TP rank, this rank's first; counts [tp, ...] of every TP rank, by TP rank)."""
    tp, me = dist.get_world_size(domains.tp_group), domains.tp_rank
    every = [torch.empty_like(counts) for _ in range(tp)]
    dist.all_gather(every, counts.contiguous(), group=domains.tp_group)
    sizes = [int(c.sum()) for c in every]
    got = rows.new_empty(sum(sizes), *rows.shape[1:])
    dist.all_to_all_single(got, torch.cat([rows] * tp), sizes, [rows.shape[0]] * tp, group=domains.tp_group)
    blocks = list(got.split(sizes))
    return torch.cat(own_first(blocks, me)), torch.stack(every)


def tp_reduce_scatter(expand_x, tp_send_counts, domains, op):
    """This rank's rows: the sum, in TP rank order, of every TP rank's version of them."""
    tp, me = dist.get_world_size(domains.tp_group), domains.tp_rank
    check(tp_send_counts is not None and tp_send_counts.numel() >= tp, op, "tp_send_counts (dispatch's tp_recv_counts) is required with the TP domain")  # fmt: skip
    sizes = [int(n) for n in tp_send_counts.reshape(-1)[:tp]]
    layout = own_first(list(range(tp)), me)
    starts, at = {}, 0
    for q in layout:
        starts[q], at = at, at + sizes[q]
    check(sum(sizes) <= expand_x.shape[0], op, f"tp_send_counts {sizes} address more rows than expand_x has ({expand_x.shape[0]})")  # fmt: skip
    send = torch.cat([expand_x[starts[q] : starts[q] + sizes[q]] for q in range(tp)])
    got = expand_x.new_empty(sizes[me] * tp, *expand_x.shape[1:])
    dist.all_to_all_single(got, send, [sizes[me]] * tp, sizes, group=domains.tp_group)
    return got.reshape(tp, sizes[me], *expand_x.shape[1:]).float().sum(0).to(expand_x.dtype)
