"""The cases of tests/distributed_worker.py that run torch_npu's collective operators on hccl groups: the MC2
matmul + collective operators, MoE dispatch / combine, the grouped-matmul all-to-alls and the distribute barrier.
Each rank checks its results against a reference it computes from every rank's inputs."""

import time

import torch
import torch.distributed as dist
from distributed_rank import DEV, RANK, WORLD, same

import torch_npu


def case_matmul_collectives():
    """npu_mm_all_reduce_base / npu_all_gather_base_mm / npu_mm_reduce_scatter_base against their collectives
    written out over every rank's inputs."""

    def inputs(rank, *shape, dtype=torch.float32):
        g = torch.Generator().manual_seed(100 + rank)
        if dtype == torch.int8:
            return torch.randint(-8, 8, shape, generator=g, dtype=torch.int8)
        return torch.randn(*shape, generator=g).to(dtype)

    hcom = dist.group.WORLD._get_backend(DEV).get_hccl_comm_name(RANK)
    x1s, x2s = [inputs(r, 4, 6) for r in range(WORLD)], [inputs(r + 50, 6, 5) for r in range(WORLD)]
    x3s, bias = [inputs(r + 70, 4, 5) for r in range(WORLD)], inputs(99, 5)
    out = torch_npu.npu_mm_all_reduce_base(
        x1s[RANK].to(DEV), x2s[RANK].to(DEV), hcom, bias=bias.to(DEV), x3=x3s[RANK].to(DEV)
    )
    want = sum(x1 @ x2 + bias + x3 for x1, x2, x3 in zip(x1s, x2s, x3s))
    torch.testing.assert_close(out.cpu(), want, rtol=1e-5, atol=1e-5)

    weights = [inputs(r + 20, 6, 5, dtype=torch.int8) for r in range(WORLD)]
    scale, offset = inputs(5, 5).abs() / 8, inputs(6, 5).round()
    out = torch_npu.npu_mm_all_reduce_base(
        x1s[RANK].to(DEV), weights[RANK].to(DEV), hcom, antiquant_scale=scale.to(DEV), antiquant_offset=offset.to(DEV)
    )
    want = sum(x1 @ ((w.float() + offset) * scale) for x1, w in zip(x1s, weights))
    torch.testing.assert_close(out.cpu(), want, rtol=1e-5, atol=1e-5)

    quant_x1 = [inputs(r + 30, 4, 6, dtype=torch.int8) for r in range(WORLD)]
    dequant = (inputs(7, 5).abs() / 16).to(torch.bfloat16)
    out = torch_npu.npu_mm_all_reduce_base(
        quant_x1[RANK].to(DEV), weights[RANK].to(DEV), hcom, dequant_scale=dequant.to(DEV)
    )
    assert out.dtype == torch.bfloat16
    want = sum((q.float() @ w.float() * dequant.float()).to(torch.bfloat16).float() for q, w in zip(quant_x1, weights))
    torch.testing.assert_close(out.cpu().float(), want, rtol=2e-2, atol=2e-2)

    shards = [inputs(r + 40, 3, 6) for r in range(WORLD)]
    out, gathered = torch_npu.npu_all_gather_base_mm(
        shards[RANK].to(DEV), x2s[RANK].to(DEV), hcom, WORLD, bias=bias.to(DEV)
    )
    same(gathered, torch.cat(shards))
    torch.testing.assert_close(out.cpu(), torch.cat(shards) @ x2s[RANK] + bias, rtol=1e-5, atol=1e-5)
    _, empty = torch_npu.npu_all_gather_base_mm(
        shards[RANK].to(DEV), x2s[RANK].to(DEV), hcom, WORLD, gather_output=False
    )
    assert empty.numel() == 0

    rows = [inputs(r + 60, 2 * WORLD, 6) for r in range(WORLD)]
    out = torch_npu.npu_mm_reduce_scatter_base(rows[RANK].to(DEV), x2s[RANK].to(DEV), hcom, WORLD, bias=bias.to(DEV))
    want = sum(x @ w + bias for x, w in zip(rows, x2s))[2 * RANK : 2 * RANK + 2]
    torch.testing.assert_close(out.cpu(), want, rtol=1e-5, atol=1e-5)

    for dtype in (torch.float16, torch.bfloat16):  # the card keeps product and sum in float32, rounds once
        halves, weights16 = [x.to(dtype) for x in x1s], [w.to(dtype) for w in x2s]
        adds = [x.to(dtype) for x in x3s]
        out = torch_npu.npu_mm_all_reduce_base(
            halves[RANK].to(DEV), weights16[RANK].to(DEV), hcom, x3=adds[RANK].to(DEV)
        )
        parts = [x.float() @ w.float() + a.float() for x, w, a in zip(halves, weights16, adds)]
        same(out, sum(parts[1:], parts[0]).to(dtype))
        tall = [x.to(dtype) for x in rows]
        out = torch_npu.npu_mm_reduce_scatter_base(tall[RANK].to(DEV), weights16[RANK].to(DEV), hcom, WORLD)
        parts = [x.float() @ w.float() for x, w in zip(tall, weights16)]
        same(out, sum(parts[1:], parts[0]).to(dtype)[2 * RANK : 2 * RANK + 2])

    pair = dist.new_group(list(range(WORLD)))
    pair_hcom = pair._get_backend(DEV).get_hccl_comm_name(RANK)
    assert pair_hcom != hcom
    out = torch_npu.npu_mm_all_reduce_base(x1s[RANK].to(DEV), x2s[RANK].to(DEV), pair_hcom)
    torch.testing.assert_close(out.cpu(), sum(x1 @ x2 for x1, x2 in zip(x1s, x2s)), rtol=1e-5, atol=1e-5)
    try:
        torch_npu.npu_mm_all_reduce_base(x1s[RANK].to(DEV), x2s[RANK].to(DEV), "hccl_nowhere")
        raise AssertionError("an unknown hcom was accepted")
    except RuntimeError as err:
        assert "npu_mm_all_reduce_base: hcom 'hccl_nowhere' names no hccl process group" in str(err), err


def case_all_to_all_matmul():
    """npu_all_to_all_matmul / npu_matmul_all_to_all against the all-to-all and matmul written out over every
    rank's inputs."""
    hcom = dist.group.WORLD._get_backend(DEV).get_hccl_comm_name(RANK)

    def inputs(rank, *shape):
        return torch.randn(*shape, generator=torch.Generator().manual_seed(300 + rank))

    bs, h, n = 2 * WORLD, 3, 5
    x1s, x2, bias = [inputs(r, bs, h) for r in range(WORLD)], inputs(90, h * WORLD, n), inputs(91, n)
    y, a2a = torch_npu.npu_all_to_all_matmul(x1s[RANK].to(DEV), x2.to(DEV), hcom, WORLD, bias=bias.to(DEV))
    chunk = bs // WORLD  # rank RANK receives chunk RANK of every rank, laid side by side
    want_a2a = torch.cat([x1s[r][RANK * chunk : (RANK + 1) * chunk] for r in range(WORLD)], 1)
    same(a2a, want_a2a)
    torch.testing.assert_close(y.cpu(), want_a2a @ x2 + bias, rtol=1e-5, atol=1e-5)
    _, empty = torch_npu.npu_all_to_all_matmul(x1s[RANK].to(DEV), x2.to(DEV), hcom, WORLD, all2all_out_flag=False)
    assert empty.numel() == 0

    x1b, x2b = [inputs(40 + r, 3, 4) for r in range(WORLD)], inputs(95, 4, 2 * WORLD)
    y = torch_npu.npu_matmul_all_to_all(x1b[RANK].to(DEV), x2b.to(DEV), hcom, WORLD)
    width = 2  # H2 / r: rank RANK receives column block RANK of every rank's product, ranks stacked
    want = torch.cat([(x1 @ x2b)[:, RANK * width : (RANK + 1) * width] for x1 in x1b])
    torch.testing.assert_close(y.cpu(), want, rtol=1e-5, atol=1e-5)

    strided = torch.empty(3, WORLD, 2, device=DEV).permute(1, 0, 2)  # HCCL moves dense blocks: views are refused
    for call in (lambda: dist.all_to_all_single(strided, torch.ones(WORLD, 3, 2, device=DEV)),
                 lambda: dist.all_reduce(strided)):  # fmt: skip
        try:
            call()
            raise AssertionError("a strided tensor was accepted")
        except ValueError as err:
            assert str(err).startswith("Tensors must be contiguous"), err


def case_quant_all_to_all_matmul():
    """npu_all_to_all_quant_matmul (exchange, then per-token dynamic float8 / int8 quantisation) and
    npu_quant_matmul_all_to_all (per-token x per-channel scales, or MX scales, then the exchange) against every rank's
    inputs written out."""
    hcom = dist.group.WORLD._get_backend(DEV).get_hccl_comm_name(RANK)
    bs, h, n = 2 * WORLD, 4, 6

    def x1_of(rank):
        return torch.randn(bs, h, generator=torch.Generator().manual_seed(700 + rank)).to(torch.bfloat16)

    g = torch.Generator().manual_seed(790)
    x2 = torch.randint(-4, 5, (h * WORLD, n), generator=g).to(torch.float8_e5m2)
    x2_scale, bias = torch.rand(n, generator=g), torch.randn(n, generator=g)
    y, a2a = torch_npu.npu_all_to_all_quant_matmul(
        x1_of(RANK).to(DEV), x2.to(DEV), hcom, WORLD, bias=bias.to(DEV), x2_scale=x2_scale.to(DEV)
    )
    chunk = bs // WORLD
    permuted = torch.cat([x1_of(r)[RANK * chunk : (RANK + 1) * chunk] for r in range(WORLD)], 1)
    same(a2a, permuted)
    token_scale = permuted.float().abs().amax(-1) / 57344.0
    q = (permuted.float() / token_scale[:, None]).to(torch.float8_e5m2)
    want = (q.double() @ x2.double()) * token_scale.double()[:, None] * x2_scale.double() + bias.double()
    assert y.dtype == torch.float32
    torch.testing.assert_close(y.cpu().double(), want, rtol=1e-5, atol=1e-4)

    w8 = torch.randint(-100, 100, (h * WORLD, n), generator=g, dtype=torch.int8)
    y8, _ = torch_npu.npu_all_to_all_quant_matmul(
        x1_of(RANK).to(DEV), w8.to(DEV), hcom, WORLD, x2_scale=x2_scale.to(DEV), x1_quant_dtype=torch.int8,
        all2all_out_flag=False, y_dtype=torch.bfloat16,
    )  # fmt: skip
    s8 = permuted.float().abs().amax(-1) / 127.0
    q8 = torch.round(permuted.float() / s8[:, None]).clamp(-128, 127)
    want8 = (q8.double() @ w8.double()) * s8.double()[:, None] * x2_scale.double()
    torch.testing.assert_close(y8.cpu().double(), want8.to(torch.bfloat16).double())

    def int_inputs(rank):
        gr = torch.Generator().manual_seed(800 + rank)
        return torch.randint(-128, 128, (3, 64), generator=gr, dtype=torch.int8), torch.rand(3, generator=gr)

    w = torch.randint(-128, 128, (64, 2 * WORLD), generator=g, dtype=torch.int8)
    ws = torch.rand(2 * WORLD, generator=g)
    x1r, s1r = int_inputs(RANK)
    out = torch_npu.npu_quant_matmul_all_to_all(x1r.to(DEV), w.to(DEV), hcom, WORLD, x1_scale=s1r.to(DEV),
                                                x2_scale=ws.to(DEV))  # fmt: skip
    width = 2  # H2 / r: rank RANK receives column block RANK of every rank's product
    blocks = []
    for r in range(WORLD):
        xr, sr = int_inputs(r)
        full = (xr.double() @ w.double()) * sr.double()[:, None] * ws.double()
        blocks.append(full[:, RANK * width : (RANK + 1) * width])
    torch.testing.assert_close(out.cpu().double(), torch.cat(blocks).float().double())

    # MX: e8m0 block scales along K from npu_dynamic_mx_quant; the product of the dequantised operands.
    a = torch.randn(3, 64, generator=torch.Generator().manual_seed(850 + RANK)).to(torch.bfloat16)
    wb = torch.randn(64, 2 * WORLD, generator=torch.Generator().manual_seed(851)).to(torch.bfloat16)
    qa, sa = torch_npu.npu_dynamic_mx_quant(a.to(DEV), dst_type=torch.float8_e4m3fn)
    qw, sw = torch_npu.npu_dynamic_mx_quant(wb.to(DEV), axis=0, dst_type=torch.float8_e4m3fn)
    mx_out = torch_npu.npu_quant_matmul_all_to_all(qa, qw, hcom, WORLD, x1_scale=sa, x2_scale=sw,
                                                   x1_scale_dtype=torch_npu.float8_e8m0fnu,
                                                   x2_scale_dtype=torch_npu.float8_e8m0fnu)  # fmt: skip
    deq_w = torch_npu.npu_anti_mx_quant(qw, sw, axis=0, dst_type=6, src_type=292).cpu()
    mine = torch_npu.npu_anti_mx_quant(qa, sa, dst_type=6, src_type=292).cpu() @ deq_w
    gathered = [torch.empty_like(mine) for _ in range(WORLD)]
    dist.all_gather_object(gathered, mine)
    want_mx = torch.cat([p[:, RANK * width : (RANK + 1) * width] for p in gathered])
    torch.testing.assert_close(mx_out.cpu(), want_mx, rtol=1e-5, atol=1e-5)

    try:
        torch_npu.npu_quant_matmul_all_to_all(x1r.to(DEV), w[:, :3].contiguous().to(DEV), hcom, WORLD,
                                              x1_scale=s1r.to(DEV), x2_scale=ws[:3].to(DEV))  # fmt: skip
        raise AssertionError("an H2 not divisible by world_size was accepted")
    except RuntimeError as err:
        assert "The x2 second-axis should be divisible by world_size." in str(err), err


def case_quant_alltoallv_gmm():
    """npu_alltoallv_quant_gmm / npu_quant_gmm_alltoallv equal npu_alltoallv_gmm / npu_gmm_alltoallv run on the
    dequantised float32 operands (MX float8 with e8m0 scales travelling with their rows; per-tensor HiFloat8)."""
    hcom = dist.group.WORLD._get_backend(DEV).get_hccl_comm_name(RANK)
    experts, h, n = 2, 64, 3
    e8m0, hif8 = torch_npu.float8_e8m0fnu, torch_npu.hifloat8
    sends = [torch.randint(0, 4, (WORLD * experts,), generator=torch.Generator().manual_seed(900 + r)).tolist()
             for r in range(WORLD)]  # fmt: skip
    send = sends[RANK]
    recv = [sends[r][RANK * experts + j] for r in range(WORLD) for j in range(experts)]
    x = torch.randn(sum(send), h, generator=torch.Generator().manual_seed(910 + RANK)).to(torch.bfloat16).to(DEV)
    w = torch.randn(experts, h, n, generator=torch.Generator().manual_seed(920)).to(torch.bfloat16).to(DEV)
    qx, sx = torch_npu.npu_dynamic_mx_quant(x, dst_type=torch.float8_e4m3fn)
    qw, sw = torch_npu.npu_dynamic_mx_quant(w, axis=-2, dst_type=torch.float8_e4m3fn)
    dx = torch_npu.npu_anti_mx_quant(qx, sx, dst_type=6, src_type=292)
    dw = torch_npu.npu_anti_mx_quant(qw, sw, axis=-2, dst_type=6, src_type=292)
    mx = {"gmm_x_quant_mode": 6, "gmm_weight_quant_mode": 6, "gmm_x_scale_dtype": e8m0,
          "gmm_weight_scale_dtype": e8m0}  # fmt: skip
    gmm_y, mm_y, permuted = torch_npu.npu_alltoallv_quant_gmm(
        qx, qw, sx, sw, hcom, WORLD, send, recv, torch.float32, permute_out_flag=True, **mx
    )
    want_y, _, want_perm = torch_npu.npu_alltoallv_gmm(dx, dw, hcom, WORLD, send, recv, permute_out_flag=True)
    assert torch.equal(gmm_y.cpu(), want_y.cpu()) and mm_y.numel() == 0
    # the permuted rows are the quantised ones: re-quantising the dequantised permutation gives the same codes
    requantised, _ = torch_npu.npu_dynamic_mx_quant(want_perm.to(torch.bfloat16), dst_type=torch.float8_e4m3fn)
    assert torch.equal(permuted.cpu().view(torch.uint8), requantised.cpu().view(torch.uint8))

    # compute first: rows grouped (expert, source rank) as the exchange above left them
    back_send, back_recv = recv, send
    hx = torch_npu.utils.hifloat8.encode(torch.randn(sum(back_send), h, generator=torch.Generator().manual_seed(930 + RANK)))  # fmt: skip
    hw = torch_npu.utils.hifloat8.encode(torch.randn(experts, h, n, generator=torch.Generator().manual_seed(931)))
    sx1, sw1 = torch.tensor([0.5]), torch.tensor([0.25, 2.0])
    y, _ = torch_npu.npu_quant_gmm_alltoallv(
        hx.to(DEV), hw.to(DEV), sx1.to(DEV), sw1.to(DEV), hcom, WORLD, back_send, back_recv, torch.float32,
        gmm_x_quant_mode=1, gmm_weight_quant_mode=1, gmm_x_dtype=hif8, gmm_weight_dtype=hif8,
    )  # fmt: skip
    fx = (torch_npu.utils.hifloat8.decode(hx) * 0.5).to(DEV)
    fw = (torch_npu.utils.hifloat8.decode(hw) * sw1[:, None, None]).to(DEV)
    want, _ = torch_npu.npu_gmm_alltoallv(fx, fw, hcom, WORLD, back_send, back_recv)
    assert torch.equal(y.cpu(), want.cpu())
    try:
        torch_npu.npu_quant_gmm_alltoallv(hx.to(DEV), hw.to(DEV), sx1.to(DEV), sw1.to(DEV), hcom, WORLD, back_send,
                                          back_recv, torch.float32, gmm_weight_quant_mode=1)  # fmt: skip
        raise AssertionError("a missing gmm_x_quant_mode was accepted")
    except RuntimeError as err:
        assert "The input gmm_x_quant_mode must be provided, but got None." in str(err), err


def case_alltoallv_gmm():
    """npu_alltoallv_gmm / npu_gmm_alltoallv against the exchange, permutation and per-expert matmuls written out
    over every rank's inputs (2 local experts per rank, uneven counts)."""
    hcom = dist.group.WORLD._get_backend(DEV).get_hccl_comm_name(RANK)
    experts, h, n = 2, 4, 3

    def counts(rank):  # rows rank sends to (destination, expert), laid out destination-major
        g = torch.Generator().manual_seed(500 + rank)
        return torch.randint(0, 4, (WORLD * experts,), generator=g).tolist()

    sends = [counts(r) for r in range(WORLD)]
    xs = [torch.randn(sum(sends[r]), h, generator=torch.Generator().manual_seed(600 + r)) for r in range(WORLD)]
    weight = torch.randn(experts, h, n, generator=torch.Generator().manual_seed(700 + RANK))
    recv = [sends[src][RANK * experts + j] for src in range(WORLD) for j in range(experts)]

    def block(src, dst, j):  # the rows of xs[src] for expert j of rank dst
        start = sum(sends[src][: dst * experts + j])
        return xs[src][start : start + sends[src][dst * experts + j]]

    permuted = torch.cat([block(src, RANK, j) for j in range(experts) for src in range(WORLD)])
    sizes = [sum(sends[src][RANK * experts + j] for src in range(WORLD)) for j in range(experts)]
    want = torch.cat([part @ weight[j] for j, part in enumerate(permuted.split(sizes))])
    mm_x, mm_w = torch.randn(2, h), torch.randn(n, h)
    y, mm_y, perm = torch_npu.npu_alltoallv_gmm(
        xs[RANK].to(DEV), weight.to(DEV), hcom, WORLD, sends[RANK], recv, mm_x=mm_x.to(DEV), mm_weight=mm_w.to(DEV),
        trans_mm_weight=True, permute_out_flag=True,
    )  # fmt: skip
    same(perm, permuted)
    torch.testing.assert_close(y.cpu(), want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(mm_y.cpu(), mm_x @ mm_w.t(), rtol=1e-5, atol=1e-5)

    # back: each rank's expert outputs return to the ranks that sent the tokens, in their original order
    back, _ = torch_npu.npu_gmm_alltoallv(permuted.to(DEV), weight.to(DEV), hcom, WORLD, recv, sends[RANK])
    weights = [torch.randn(experts, h, n, generator=torch.Generator().manual_seed(700 + r)) for r in range(WORLD)]
    returned = torch.cat([block(RANK, dst, j) @ weights[dst][j] for dst in range(WORLD) for j in range(experts)])
    torch.testing.assert_close(back.cpu(), returned, rtol=1e-5, atol=1e-5)


def _int8_communicated(row):
    """One row as combine's int8 communication delivers it, written out group by group of 8 elements: the scale
    max |x| * (1 / 127) in float32, values rint(half(x / scale)), sent scale rounded to the row's dtype."""
    out = []
    for start in range(0, row.numel(), 8):
        block = row[start : start + 8].float()
        scale = block.abs().max() * torch.tensor(1.0 / 127.0)
        if float(scale) == 0.0:
            out.append(torch.zeros_like(block))
            continue
        values = (block / scale).to(torch.float16).float().round()
        out.append(values * scale.to(row.dtype).float())
    return torch.cat(out).to(row.dtype)


def case_moe_distribute():
    """npu_moe_distribute_dispatch / _combine (+ _v2, combine_add_rms_norm): the rows each rank receives, its
    counts, and the combined result of an "expert" that scales its rows, against the routing written out over
    every rank's inputs."""
    hcom = dist.group.WORLD._get_backend(DEV).get_hccl_comm_name(RANK)
    experts, local, bs, k, h = 2 * WORLD, 2, 3, 2, 20

    def inputs(rank):
        g = torch.Generator().manual_seed(800 + rank)
        ids = torch.stack([torch.randperm(experts, generator=g)[:k] for _ in range(bs)]).to(torch.int32)
        return torch.randn(bs, h, generator=g).to(torch.bfloat16), ids, torch.rand(bs, k, generator=g)

    xs, ids, weights = zip(*[inputs(r) for r in range(WORLD)])
    args = (hcom, WORLD, RANK, experts)
    out = torch_npu.npu_moe_distribute_dispatch(xs[RANK].to(DEV), ids[RANK].to(DEV), *args, expert_scales=weights[RANK].to(DEV))  # fmt: skip
    expand_x, _, expand_idx, token_nums, recv_counts, _, expand_scales = out
    want_rows, want_scales, per = [], [], []
    for j in range(local):
        expert = RANK * local + j
        for src in range(WORLD):
            routes = [(t, c) for t in range(bs) for c in range(k) if int(ids[src][t, c]) == expert]
            want_rows += [xs[src][t] for t, _ in routes]
            want_scales += [float(weights[src][t, c]) for t, c in routes]
            per.append(len(routes))
    received = len(want_rows)
    assert expand_x.shape == (bs * WORLD * min(local, k), h)
    same(expand_x[:received], torch.stack(want_rows))
    mine = ids[RANK].reshape(-1).tolist()  # expand_idx: each route's index among this rank's routes to its expert
    same(expand_idx, torch.tensor([mine[:r].count(e) for r, e in enumerate(mine)], dtype=torch.int32))
    assert not expand_x[received:].cpu().any()
    torch.testing.assert_close(expand_scales[:received].cpu(), torch.tensor(want_scales))
    same(recv_counts, torch.tensor(per).cumsum(0).to(torch.int32))
    same(token_nums, torch.tensor(per).reshape(local, WORLD).sum(1).to(torch.int64))

    factor = torch.tensor([RANK * local + j + 1.0 for j, n in zip(range(local), torch.tensor(per).reshape(local, WORLD).sum(1)) for _ in range(int(n))])  # fmt: skip
    processed = expand_x.clone()
    processed[:received] = (expand_x[:received].float() * factor.to(DEV)[:, None]).to(torch.bfloat16)
    combined = torch_npu.npu_moe_distribute_combine(processed, ids[RANK].to(DEV), expand_idx, recv_counts, weights[RANK].to(DEV), *args)  # fmt: skip
    want = sum(
        weights[RANK][:, c : c + 1] * (xs[RANK].float() * (ids[RANK][:, c : c + 1].float() + 1)).to(torch.bfloat16).float()
        for c in range(k)
    )  # fmt: skip
    torch.testing.assert_close(combined.cpu().float(), want, atol=2e-2, rtol=2e-2)
    combined_v2 = torch_npu.npu_moe_distribute_combine_v2(processed, ids[RANK].to(DEV), expand_idx, recv_counts, weights[RANK].to(DEV), *args)  # fmt: skip
    same(combined_v2, combined.cpu())

    residual, gamma = torch.randn(bs, h).to(torch.bfloat16), torch.rand(h).to(torch.bfloat16)
    y, rstd, summed = torch_npu.npu_moe_distribute_combine_add_rms_norm(
        processed, ids[RANK].to(DEV), expand_idx, recv_counts, weights[RANK].to(DEV), residual.to(DEV), gamma.to(DEV), *args
    )  # fmt: skip
    same(summed, (combined.cpu().float() + residual.float()).to(torch.bfloat16))
    torch.testing.assert_close(y.cpu().float(), torch.nn.functional.rms_norm(summed.cpu().float(), (h,), gamma.float(), 1e-6), atol=2e-2, rtol=2e-2)  # fmt: skip

    # comm_quant_mode 2: the expert rows travel as int8, one scale (in the rows' dtype) per 8 elements
    routed = [(xs[RANK].float() * (ids[RANK][:, c : c + 1].float() + 1)).to(torch.bfloat16) for c in range(k)]
    sent = torch.stack([torch.stack([_int8_communicated(r[t]) for t in range(bs)]) for r in routed], 1).float()
    want_q = (sent * weights[RANK].reshape(bs, k, 1)).sum(1).to(torch.bfloat16)
    call = (processed, ids[RANK].to(DEV), expand_idx, recv_counts, weights[RANK].to(DEV), *args)
    for combine in (torch_npu.npu_moe_distribute_combine, torch_npu.npu_moe_distribute_combine_v2):
        same(combine(*call, comm_quant_mode=2), want_q)
    _, _, summed_q = torch_npu.npu_moe_distribute_combine_add_rms_norm(*call[:5], residual.to(DEV), gamma.to(DEV), *args, comm_quant_mode=2)  # fmt: skip
    same(summed_q, (want_q.float() + residual.float()).to(torch.bfloat16))
    assert not torch.equal(want_q, combined.cpu())
    torch.testing.assert_close(want_q.float(), combined.cpu().float(), atol=5e-2, rtol=2e-2)
    try:
        torch_npu.npu_moe_distribute_combine(*call, comm_quant_mode=1)
    except RuntimeError as error:
        assert str(error).splitlines()[0] == "npu_moe_distribute_combine: comm_quant_mode must be 0 (none) or 2 (int8), got 1"  # fmt: skip
    else:
        raise AssertionError("comm_quant_mode 1 was taken")

    quant = torch_npu.npu_moe_distribute_dispatch_v2(xs[RANK].to(DEV), ids[RANK].to(DEV), *args, quant_mode=2)
    assert quant[0].dtype == torch.int8
    dequant = quant[0][:received].float() * quant[1][:received, None]
    torch.testing.assert_close(dequant.cpu(), torch.stack(want_rows).float(), atol=3e-2, rtol=3e-2)


def case_moe_distribute_phases():
    """The setup / teardown pairs equal the one-call dispatch and combine: the same expand_x (plain, and int8 with
    smooth scales), dynamic scales, counts and combined tokens."""
    hcom = dist.group.WORLD._get_backend(DEV).get_hccl_comm_name(RANK)
    experts, bs, k, h = 2 * WORLD, 3, 2, 40
    g = torch.Generator().manual_seed(900 + RANK)
    ids = torch.stack([torch.randperm(experts, generator=g)[:k] for _ in range(bs)]).to(torch.int32).to(DEV)
    x = torch.randn(bs, h, generator=g).to(torch.bfloat16).to(DEV)
    weights = torch.rand(bs, k, generator=g).to(DEV)
    smooth = torch.rand(experts, h, generator=torch.Generator().manual_seed(950)).to(DEV) + 0.5
    args = (hcom, WORLD, RANK, experts)
    for quant_mode, scales in ((0, None), (2, smooth)):
        y, expand_idx, cmd = torch_npu.npu_moe_distribute_dispatch_setup(
            x, ids, *args, scales=scales, quant_mode=quant_mode
        )
        assert y.shape == (bs * k, 512 if quant_mode == 2 else 256)
        expand_x, dyn, assist, nums = torch_npu.npu_moe_distribute_dispatch_teardown(
            x, y, ids, cmd, *args, quant_mode=quant_mode
        )
        one = torch_npu.npu_moe_distribute_dispatch(x, ids, *args, scales=scales, quant_mode=quant_mode)
        same(expand_x, one[0].cpu())
        same(dyn, one[1].cpu())
        same(assist, one[4].cpu())
        same(nums, one[3].cpu())
        same(expand_idx, one[2].cpu())
    y, idx, cmd = torch_npu.npu_moe_distribute_dispatch_setup(x, ids, *args)
    expand_x, _, assist, _ = torch_npu.npu_moe_distribute_dispatch_teardown(x, y, ids, cmd, *args)
    processed = (expand_x.float() * 1.5).to(torch.bfloat16)
    quant_x, cmd = torch_npu.npu_moe_distribute_combine_setup(processed, ids, assist, *args)
    out = torch_npu.npu_moe_distribute_combine_teardown(processed, quant_x, ids, idx, weights, cmd, *args)
    same(out, torch_npu.npu_moe_distribute_combine(processed, ids, idx, assist, weights, *args).cpu())


def case_quant_matmul_collectives():
    """npu_all_gather_quant_mm / npu_quant_mm_reduce_scatter: float, per-token x per-channel int8 and per-block
    float8 operands against the gathered / reduced dequantised products written out."""
    hcom = dist.group.WORLD._get_backend(DEV).get_hccl_comm_name(RANK)

    def ints(seed, *shape):
        return torch.randint(-8, 8, shape, generator=torch.Generator().manual_seed(seed), dtype=torch.int8)

    def floats(seed, *shape):
        return torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) + 0.5

    x1s, x2 = [ints(900 + r, 4, 6) for r in range(WORLD)], ints(950, 6, 5)
    s1s, s2 = [floats(960 + r, 4, 1) for r in range(WORLD)], floats(970, 1, 5)
    y, gathered, amax = torch_npu.npu_all_gather_quant_mm(
        x1s[RANK].to(DEV), x2.to(DEV), hcom, WORLD, x1_scale=s1s[RANK].to(DEV), x2_scale=s2.to(DEV),
        y_dtype=torch.float32,
    )  # fmt: skip
    full = torch.cat(x1s)
    same(gathered, full)
    assert amax.numel() == 0
    torch.testing.assert_close(y.cpu(), (full.float() @ x2.float()) * torch.cat(s1s) * s2, rtol=1e-5, atol=1e-5)

    a = [torch.randn(256, 256, generator=torch.Generator().manual_seed(980 + r)).to(torch.float8_e4m3fn) for r in range(WORLD)]  # fmt: skip
    b = torch.randn(256, 128, generator=torch.Generator().manual_seed(990)).to(torch.float8_e4m3fn)
    sa, sb = [floats(1000 + r, 2, 2) for r in range(WORLD)], floats(1010, 2, 1)
    y, _, _ = torch_npu.npu_all_gather_quant_mm(
        a[RANK].to(DEV), b.to(DEV), hcom, WORLD, x1_scale=sa[RANK].to(DEV), x2_scale=sb.to(DEV), y_dtype=torch.float32
    )
    full_a, full_sa = torch.cat(a).float(), torch.cat(sa)
    want = sum(
        full_a[:, kb * 128 : (kb + 1) * 128] @ b.float()[kb * 128 : (kb + 1) * 128]
        * full_sa[:, kb].repeat_interleave(128)[:, None] * sb[kb, 0]
        for kb in range(2)
    )  # fmt: skip
    torch.testing.assert_close(y.cpu(), want, rtol=1e-4, atol=1e-3)

    rows = [ints(1020 + r, 2 * WORLD, 6) for r in range(WORLD)]
    y, _ = torch_npu.npu_quant_mm_reduce_scatter(
        rows[RANK].to(DEV), x2.to(DEV), hcom, WORLD, x1_scale=torch.tensor([0.5]).to(DEV), x2_scale=s2.to(DEV),
        y_dtype=torch.float32,
    )  # fmt: skip
    want = sum(r.float() @ x2.float() * 0.5 * s2 for r in rows)[2 * RANK : 2 * RANK + 2]
    torch.testing.assert_close(y.cpu(), want, rtol=1e-5, atol=1e-5)

    halves, weight = [floats(1030 + r, 2 * WORLD, 6).half() for r in range(WORLD)], floats(1040, 6, 5).half()
    y, gathered, _ = torch_npu.npu_all_gather_quant_mm(halves[RANK].to(DEV), weight.to(DEV), hcom, WORLD)
    same(gathered, torch.cat(halves))
    same(y, (torch.cat(halves).float() @ weight.float()).half())
    y, _ = torch_npu.npu_quant_mm_reduce_scatter(halves[RANK].to(DEV), weight.to(DEV), hcom, WORLD)
    parts = [h.float() @ weight.float() for h in halves]
    same(y, sum(parts[1:], parts[0]).half()[2 * RANK : 2 * RANK + 2])

    try:  # float8 moves as bytes (the gathers above) but is never reduced
        dist.all_reduce(a[RANK].to(DEV))
        raise AssertionError("a float8 all_reduce was accepted")
    except RuntimeError as err:
        assert "HCCL does not reduce Float8_e4m3fn tensors" in str(err), err


def case_distribute_barrier():
    """_npu_distribute_barrier returns only once every live rank called it: over the whole group (a late rank
    holds the others), over the ranks elastic_info keeps (a dropped rank never calls), and it fails naming how
    many arrived when a live rank does not come within time_out."""
    hcom = dist.group.WORLD._get_backend(DEV).get_hccl_comm_name(RANK)
    store = dist.distributed_c10d._get_default_store()
    x_ref = torch.arange(4, dtype=torch.int32, device=DEV)
    time.sleep(0.4 * RANK)
    store.set(f"before/{RANK}", "1")
    out = torch_npu._npu_distribute_barrier(x_ref, hcom, WORLD)
    assert all(store.check([f"before/{r}"]) for r in range(WORLD)), "the barrier returned before every rank came"
    same(out, x_ref.cpu())

    def elastic(live):
        table = [-1] * WORLD
        for local, ep in enumerate(live):
            table[local] = ep
        return torch.tensor([1, len(live), 0, 4 * len(live)] + [-1] * WORLD + table, dtype=torch.int32).to(DEV)

    survivors = [r for r in range(WORLD) if r != 1]
    if RANK in survivors:
        out = torch_npu._npu_distribute_barrier(x_ref, hcom, WORLD, elastic_info=elastic(survivors))
        same(out, x_ref.cpu())
        short = torch.tensor([200000], dtype=torch.int32, device=DEV)
        try:
            torch_npu._npu_distribute_barrier(
                x_ref, hcom, WORLD, time_out=short, elastic_info=elastic(list(range(WORLD)))
            )
            raise AssertionError("a barrier missing a live rank returned")
        except RuntimeError as error:
            assert f"timed out waiting for group {hcom!r}: {len(survivors)} of {WORLD} ranks arrived" in str(
                error
            ), error
    try:
        torch_npu._npu_distribute_barrier(x_ref, hcom, WORLD + 1)
        raise AssertionError("a wrong world_size was accepted")
    except RuntimeError as error:
        assert f"world_size {WORLD + 1} differs from group" in str(error), error
    dist.barrier()
