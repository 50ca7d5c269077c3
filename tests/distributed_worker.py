"""One rank of a multi-process hccl test (tests/test_distributed.py starts WORLD_SIZE of them).

    python distributed_worker.py CASE     (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment)

Training across ranks is in distributed_training_cases.py, the collective operators in
distributed_operator_cases.py, context parallelism in context_parallel_cases.py. Every rank builds every rank's inputs
from the rank number, so each result is checked against a
reference computed here, exactly; a failed check raises (non-zero exit)."""

import datetime
import os
import sys
import time

import compiled_collective_cases
import context_parallel_cases
import distributed_operator_cases
import distributed_training_cases
import moe_domain_cases
import profiled_collective_cases
import silent_check_cases
import torch
import torch.distributed as dist
from distributed_rank import DEV, RANK, WORLD, data, same

import torch_npu


def case_collectives():
    everyone = [data(r) for r in range(WORLD)]
    stacked = torch.stack(everyone)
    for op, want in (
        (dist.ReduceOp.SUM, stacked.sum(0)),
        (dist.ReduceOp.PRODUCT, stacked.prod(0)),
        (dist.ReduceOp.MIN, stacked.min(0).values),
        (dist.ReduceOp.MAX, stacked.max(0).values),
        (dist.ReduceOp.AVG, stacked.sum(0) / WORLD),
    ):
        t = data(RANK).to(DEV)
        dist.all_reduce(t, op=op)
        torch.testing.assert_close(t.cpu(), want, rtol=0, atol=1e-6)
    t = data(RANK).to(DEV)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    torch.testing.assert_close(t.cpu(), (stacked * 0.5).sum(0), rtol=0, atol=1e-6)
    flags = torch.tensor([RANK == 0, False, True], device=DEV)
    dist.all_reduce(flags)  # bool SUM is a logical or (MAX)
    same(flags, torch.tensor([True, False, True]))
    ints = torch.tensor([RANK + 1, 7], device=DEV)
    dist.all_reduce(ints, op=dist.ReduceOp.AVG)
    same(ints, torch.tensor([sum(range(1, WORLD + 1)) // WORLD, 7]))
    try:
        dist.all_reduce(torch.ones(2, dtype=torch.int32, device=DEV), op=dist.ReduceOp.BAND)
        raise AssertionError("BAND was accepted")
    except RuntimeError as err:
        assert "Cannot use ReduceOp.BAND with HCCL" in str(err) and "ERR02007" in str(err), err
    b = data(RANK).to(DEV)
    dist.broadcast(b, src=WORLD - 1)
    same(b, everyone[-1])
    r = data(RANK).to(DEV)
    dist.reduce(r, dst=0)
    if RANK == 0:
        same(r, stacked.sum(0))
    gathered = [torch.empty(6, device=DEV) for _ in range(WORLD)]
    dist.all_gather(gathered, data(RANK).to(DEV))
    for g, w in zip(gathered, everyone):
        same(g, w)
    flat = torch.empty(6 * WORLD, device=DEV)
    dist.all_gather_into_tensor(flat, data(RANK).to(DEV))
    same(flat, torch.cat(everyone))
    chunks = [data(RANK, 6) * (i + 1) for i in range(WORLD)]
    out = torch.empty(6, device=DEV)
    dist.reduce_scatter(out, [c.to(DEV) for c in chunks])
    same(out, sum(data(r, 6) * (RANK + 1) for r in range(WORLD)))
    big = torch.cat([data(RANK, 4) + i for i in range(WORLD)]).to(DEV)
    piece = torch.empty(4, device=DEV)
    dist.reduce_scatter_tensor(piece, big, op=dist.ReduceOp.AVG)
    torch.testing.assert_close(piece.cpu(), sum(data(r, 4) + RANK for r in range(WORLD)) / WORLD, rtol=0, atol=1e-6)
    sends = [torch.full((2,), float(RANK * 10 + j), device=DEV) for j in range(WORLD)]
    recvs = [torch.empty(2, device=DEV) for _ in range(WORLD)]
    dist.all_to_all(recvs, sends)
    for j, got in enumerate(recvs):
        same(got, torch.full((2,), float(j * 10 + RANK)))
    in_splits = [r + 1 for r in range(WORLD)]  # rank RANK sends r + 1 values to rank r
    out_splits = [RANK + 1] * WORLD
    src = torch.arange(sum(in_splits), dtype=torch.float32, device=DEV) + 100 * RANK
    dst = torch.empty(sum(out_splits), device=DEV)
    dist.all_to_all_single(dst, src, out_splits, in_splits)
    want = torch.cat(
        [
            torch.arange(sum(range(1, RANK + 1)), sum(range(1, RANK + 2)), dtype=torch.float32) + 100 * r
            for r in range(WORLD)
        ]
    )
    same(dst, want)
    if RANK == 0:
        buckets = [torch.empty(6, device=DEV) for _ in range(WORLD)]
        dist.gather(data(RANK).to(DEV), buckets, dst=0)
        for g, w in zip(buckets, everyone):
            same(g, w)
    else:
        dist.gather(data(RANK).to(DEV), None, dst=0)
    piece = torch.empty(6, device=DEV)
    dist.scatter(piece, [w.to(DEV) for w in everyone] if RANK == 0 else None, src=0)
    same(piece, everyone[RANK])
    nxt, prv = (RANK + 1) % WORLD, (RANK - 1) % WORLD
    incoming = torch.empty(6, device=DEV)
    ops = [dist.P2POp(dist.isend, data(RANK).to(DEV), nxt), dist.P2POp(dist.irecv, incoming, prv)]
    works = dist.batch_isend_irecv(ops)
    assert len(works) == 1  # torch_npu: one work for the batch
    assert works[0].wait() is True and works[0].is_completed() and works[0].is_success()
    same(incoming, everyone[prv])
    mixed = [dist.P2POp(dist.isend, data(RANK).to(DEV), nxt), dist.P2POp(dist.irecv, torch.empty(6), prv)]
    try:
        dist.batch_isend_irecv(mixed)
        raise AssertionError("a batch mixing npu and cpu tensors was accepted")
    except RuntimeError as err:
        assert str(err).startswith(
            "No backend type associated with device type cpu"
        ) and "ERR02001 DIST invalid parameter" in str(err), err
    if RANK == 0:
        dist.send(torch.tensor([42.0], device=DEV), dst=1)
    elif RANK == 1:
        box = torch.empty(1, device=DEV)
        dist.recv(box, src=0)
        same(box, torch.tensor([42.0]))
    work = dist.all_reduce(torch.ones(3, device=DEV), async_op=True)
    result = work.get_future().wait()
    same(result[0], torch.full((3,), float(WORLD)))
    objects = [None] * WORLD
    dist.all_gather_object(objects, {"rank": RANK})
    assert objects == [{"rank": r} for r in range(WORLD)], objects
    box = [{"from": RANK}]
    dist.broadcast_object_list(box, src=0)
    assert box == [{"from": 0}]
    a, c = torch.ones(3, device=DEV), torch.full((2,), 2.0, device=DEV)
    with dist._coalescing_manager(async_ops=True) as manager:
        dist.all_reduce(a)
        dist.all_reduce(c)
    manager.wait()
    same(a, torch.full((3,), float(WORLD)))
    same(c, torch.full((2,), 2.0 * WORLD))
    dist.barrier()
    assert dist.get_backend() == "hccl"
    name = torch_npu.distributed.get_hccl_comm_name()
    assert name.startswith("hccl_")


def case_uneven():
    from torch_npu.distributed import all_gather_into_tensor_uneven, reduce_scatter_tensor_uneven

    sizes = [r + 1 for r in range(WORLD)]
    mine = torch.full((sizes[RANK], 2), float(RANK), device=DEV)
    out = torch.empty(sum(sizes), 2, device=DEV)
    all_gather_into_tensor_uneven(out, mine, output_split_sizes=sizes)
    same(out, torch.cat([torch.full((n, 2), float(r)) for r, n in enumerate(sizes)]))
    whole = torch.arange(sum(sizes) * 2, dtype=torch.float32).view(-1, 2) * (RANK + 1)
    piece = torch.empty(sizes[RANK], 2, device=DEV)
    work = reduce_scatter_tensor_uneven(piece, whole.to(DEV), input_split_sizes=sizes, async_op=True)
    work.wait()
    start = sum(sizes[:RANK])
    reference = sum(torch.arange(sum(sizes) * 2, dtype=torch.float32).view(-1, 2) * (r + 1) for r in range(WORLD))
    same(piece, reference[start : start + sizes[RANK]])
    try:
        all_gather_into_tensor_uneven(out, mine, output_split_sizes=[1] * WORLD)
        raise AssertionError("bad split sizes were accepted")
    except ValueError as err:
        assert "must give" in str(err) or "does not match" in str(err), err


def case_all_to_all_vc():
    from torch_npu.distributed import all_to_all_vc

    # rank i sends (2i + j + 1) elements to rank j (not symmetric), each valued 100 * i + j; all ranks pass it
    matrix = [[2 * i + j + 1 for j in range(WORLD)] for i in range(WORLD)]
    sends = torch.cat([torch.full((matrix[RANK][j],), 100.0 * RANK + j) for j in range(WORLD)])
    output = torch.empty(sum(matrix[i][RANK] for i in range(WORLD)), device=DEV)
    all_to_all_vc(output, sends.to(DEV), matrix)
    same(output, torch.cat([torch.full((matrix[i][RANK],), 100.0 * i + RANK) for i in range(WORLD)]))
    work = all_to_all_vc(output, sends.to(DEV), matrix, async_op=True)
    work.wait()
    same(output, torch.cat([torch.full((matrix[i][RANK],), 100.0 * i + RANK) for i in range(WORLD)]))
    for bad, text in [
        (matrix[:-1], f"must have {WORLD} rows"),
        ([row[:-1] for row in matrix], "must be a square"),
        ([[1] * WORLD for _ in range(WORLD)], "but input has"),
    ]:
        try:
            all_to_all_vc(output, sends.to(DEV), bad)
            raise AssertionError(f"accepted {bad}")
        except ValueError as err:
            assert text in str(err), err
    negative = [row[:] for row in matrix]
    negative[0][0] = -1
    both = torch.zeros(2 * sum(matrix[RANK]), device=DEV)
    for args, text in [
        ((output, sends.to(DEV), negative), "send_count_matrix: element counts must be non-negative"),
        ((output, both[::2], matrix), "all_to_all_vc: input and output must be contiguous"),
    ]:
        try:
            all_to_all_vc(*args)
            raise AssertionError(f"accepted {text}")
        except ValueError as err:
            assert str(err).split("\n")[0] == text, err
    buffer = torch.zeros(WORLD, device=DEV)  # a one-element exchange with every rank, in place
    try:
        all_to_all_vc(buffer, buffer, [[1] * WORLD for _ in range(WORLD)])
        raise AssertionError("in-place accepted")
    except ValueError as err:
        expected = "all_to_all_vc: output must not share memory with input (in-place is not supported)"
        assert str(err).split("\n")[0] == expected, err


def case_desync():
    t = torch.ones(4 + RANK, device=DEV)  # rank 1 reduces a different shape
    try:
        dist.all_reduce(t)
        raise AssertionError("the mismatch went unnoticed")
    except RuntimeError as err:
        text = str(err)
        assert "Detected mismatch between collectives" in text and "rank 0: allreduce(#0, numel=4" in text, text
        assert "rank 1: allreduce(#0, numel=5" in text and "ERR02001" in text, text
    try:
        if RANK == 0:
            dist.all_reduce(torch.ones(2, device=DEV))
        else:
            dist.broadcast(torch.ones(2, device=DEV), src=0)
        raise AssertionError("the mismatch went unnoticed")
    except RuntimeError as err:
        assert "rank 0: allreduce(#1" in str(err) and "rank 1: broadcast(#1" in str(err), str(err)


def _all_reduce_expecting_failure():
    """An all_reduce that must fail: prints the error and how long it took, exits 7."""
    start = time.time()
    try:
        dist.all_reduce(torch.ones(4, device=DEV))
        raise AssertionError("the collective completed without its peer")
    except RuntimeError as err:
        print(f"ERROR after {time.time() - start:.1f}s: {err}", flush=True)
        sys.exit(7)


def case_dead_rank():
    if RANK == 1:
        os._exit(3)  # dies without a word, as a crashed process does
    _all_reduce_expecting_failure()


def _rank_order(tensors, combine):
    """The intra-host link's documented order: ((x0 op x1) op x2) ..., each step rounded in the dtype."""
    result = tensors[0].clone()
    for t in tensors[1:]:
        result = combine(result, t)
    return result


def case_intra_host_link():
    """Collectives over the shared-memory link, several chunks long: every dtype and reduction bit for bit the
    rank-order reduction; broadcast, all_gather_into_tensor and reduce_scatter_tensor byte for byte; a gloo
    collective still running is finished before the link touches the same tensor."""
    backend = dist.group.WORLD._get_backend(DEV)
    over_shm = os.environ.get("HCCL_INTRA_ROCE_ENABLE") != "1"
    assert backend._uses_intra_host_link == over_shm, backend._uses_intra_host_link
    if RANK == 0:  # the segment's name is gone once every rank mapped it: nothing is left behind in /dev/shm
        assert not [f for f in os.listdir("/dev/shm") if f.startswith(f"vnpu_hccl_{os.getpid()}_")]
    n = 700_001  # 2.8 MB of float32: several slots, and an odd tail
    inputs = {}
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.uint8):
        gen = torch.Generator().manual_seed(1234)
        if dtype.is_floating_point:
            everyone = [torch.randn(n, generator=gen).to(dtype) for _ in range(WORLD)]
        else:
            info = torch.iinfo(dtype)
            everyone = [torch.randint(info.min, info.max, (n,), generator=gen, dtype=dtype) for _ in range(WORLD)]
        inputs[dtype] = everyone
        for op, combine in (
            (dist.ReduceOp.SUM, torch.add),
            (dist.ReduceOp.PRODUCT, torch.mul),
            (dist.ReduceOp.MIN, torch.minimum),
            (dist.ReduceOp.MAX, torch.maximum),
        ):
            t = everyone[RANK].to(DEV)
            dist.all_reduce(t, op=op)
            want = _rank_order(everyone, combine)
            if over_shm or not dtype.is_floating_point or op in (dist.ReduceOp.MIN, dist.ReduceOp.MAX):
                same(t, want)
            else:  # gloo's own summation order
                torch.testing.assert_close(t.cpu(), want, equal_nan=True)
    t = inputs[torch.float32][RANK].to(DEV)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    torch.testing.assert_close(t.cpu(), _rank_order(inputs[torch.float32], torch.add) / WORLD, rtol=0, atol=0)
    flags = (inputs[torch.uint8][RANK] > 200).to(DEV)
    dist.all_reduce(flags)
    same(flags, _rank_order([x > 200 for x in inputs[torch.uint8]], torch.logical_or))
    empty = torch.empty(0, device=DEV)
    dist.all_reduce(empty)
    assert empty.numel() == 0
    b = inputs[torch.float64][RANK].to(DEV)
    dist.broadcast(b, src=WORLD - 1)
    same(b, inputs[torch.float64][-1])
    gathered = torch.empty(WORLD * n, dtype=torch.bfloat16, device=DEV)
    dist.all_gather_into_tensor(gathered, inputs[torch.bfloat16][RANK].to(DEV))
    same(gathered, torch.cat(inputs[torch.bfloat16]))
    listed = [torch.empty(n, dtype=torch.float16, device=DEV) for _ in range(WORLD)]
    dist.all_gather(listed, inputs[torch.float16][RANK].to(DEV))
    for got, want in zip(listed, inputs[torch.float16]):
        same(got, want)
    root = WORLD - 1
    reduced = inputs[torch.float32][RANK].to(DEV)
    dist.reduce(reduced, dst=root)
    if over_shm:  # the root has the rank-order sum, the others keep their tensors (gloo leaves them undefined)
        same(reduced, _rank_order(inputs[torch.float32], torch.add) if RANK == root else inputs[torch.float32][RANK])
    elif RANK == root:
        torch.testing.assert_close(reduced.cpu(), _rank_order(inputs[torch.float32], torch.add))
    part = torch.empty(n // WORLD, dtype=torch.int64, device=DEV)
    whole = [x[: part.numel() * WORLD] for x in inputs[torch.int64]]
    dist.reduce_scatter_tensor(part, whole[RANK].to(DEV))
    same(part, _rank_order(whole, torch.add).chunk(WORLD)[RANK])
    if not over_shm:
        return
    ordered = torch.zeros(n, device=DEV)
    pieces = [torch.full((n,), r + 1.0, device=DEV) for r in range(WORLD)] if RANK == 0 else None
    pending = dist.scatter(ordered, pieces, src=0, async_op=True)  # on the gloo transport
    dist.all_reduce(ordered)  # on the link: starts after the scatter
    pending.wait()
    same(ordered, torch.full((n,), WORLD * (WORLD + 1) / 2))


def case_intra_host_in_place():
    """Allreduces, allgathers and reduce-scatters of 64 KiB and more run in place on the ranks' npu memory when every
    rank's tensor (allgather: output) is in its segment arena: the rank-order reduction bit for bit, also on a view
    starting mid-page whose neighbours stay untouched, and again on the same tensor (its peers' memory mapped once);
    the gathered bytes, also when the input is the rank's own part of the output (another rank's part: staged);
    reduce-scatters also into the rank's own part of the input and into a strided output (another rank's part: the
    allreduce of a host copy). One rank's tensor outside its arena (a storage shared with torch.multiprocessing)
    sends every rank down the staged path, with the same result."""
    backend = dist.group.WORLD._get_backend(DEV)
    n = 300_007
    gen = torch.Generator().manual_seed(99)
    everyone = [torch.randn(n, generator=gen) for _ in range(WORLD)]
    want = _rank_order(everyone, torch.add)
    start = backend._in_place_collectives

    def ran(allreduce, allgather, reduce_scatter):
        now = backend._in_place_collectives
        got = {kind: now[kind] - start.get(kind, 0) for kind in now}
        assert got == {"allreduce": allreduce, "allgather": allgather, "reduce_scatter": reduce_scatter}, got

    t = everyone[RANK].to(DEV)
    dist.all_reduce(t)
    same(t, want)
    ran(1, 0, 0)
    buffer = torch.full((n + 37 + 11,), -7.0, device=DEV)
    view = buffer[37 : 37 + n]
    for _ in range(2):
        view.copy_(everyone[RANK])
        dist.all_reduce(view)
        same(view, want)
    same(buffer[:37], torch.full((37,), -7.0))
    same(buffer[37 + n :], torch.full((11,), -7.0))
    ran(3, 0, 0)
    small = torch.ones(1000, device=DEV)  # 4 KB: the staged walk
    dist.all_reduce(small)
    same(small, torch.full((1000,), float(WORLD)))
    outside = everyone[RANK].to(DEV)
    if RANK == 0:  # moved into a memfd of its own, as for sending it to another process
        outside.untyped_storage()._share_npu_()
    dist.all_reduce(outside)
    same(outside, want)
    ran(3, 0, 0)
    gathered = torch.full((WORLD * n + 5,), -7.0, device=DEV)
    dist.all_gather_into_tensor(gathered[: WORLD * n], everyone[RANK].to(DEV))
    same(gathered[: WORLD * n], torch.cat(everyone))
    same(gathered[WORLD * n :], torch.full((5,), -7.0))
    own = torch.zeros(WORLD * n, device=DEV)  # the input is this rank's own part of the output
    own[RANK * n : (RANK + 1) * n] = everyone[RANK].to(DEV)
    dist.all_gather_into_tensor(own, own[RANK * n : (RANK + 1) * n])
    same(own, torch.cat(everyone))
    ran(3, 2, 0)
    shifted = torch.zeros(WORLD * n, device=DEV)  # the input is the next rank's part of the output: staged
    nxt = (RANK + 1) % WORLD
    shifted[nxt * n : (nxt + 1) * n] = everyone[RANK].to(DEV)
    dist.all_gather_into_tensor(shifted, shifted[nxt * n : (nxt + 1) * n])
    same(shifted, torch.cat(everyone))
    ran(3, 2, 0)
    if RANK == WORLD - 1:
        own.untyped_storage()._share_npu_()
    dist.all_gather_into_tensor(own, (everyone[RANK] * 2).to(DEV))
    same(own, torch.cat(everyone) * 2)
    ran(3, 2, 0)
    whole = [torch.cat([x, x.flip(0)]) for x in everyone]  # 2n elements per rank, n per part
    m = 2 * n // WORLD
    parts = [w[: m * WORLD] for w in whole]
    reduced = _rank_order(parts, torch.add).view(WORLD, m)
    out = torch.empty(m, device=DEV)
    dist.reduce_scatter_tensor(out, parts[RANK].to(DEV))
    same(out, reduced[RANK])
    inp = parts[RANK].to(DEV)  # the output is this rank's own part of the input
    dist.reduce_scatter_tensor(inp[RANK * m : (RANK + 1) * m], inp)
    same(inp[RANK * m : (RANK + 1) * m], reduced[RANK])
    strided = torch.zeros(m, 2, device=DEV)[:, 0]  # not contiguous: reduced elsewhere, then copied
    dist.reduce_scatter_tensor(strided, parts[RANK].to(DEV), op=dist.ReduceOp.AVG)
    same(strided, reduced[RANK] / WORLD)
    ran(3, 2, 3)
    inp = parts[RANK].to(DEV)  # an output over another rank's part of this input: the allreduce of a copy
    other = (RANK + 1) % WORLD
    dist.reduce_scatter_tensor(inp[other * m : (other + 1) * m], inp)
    same(inp[other * m : (other + 1) * m], reduced[RANK])
    ran(3, 2, 3)  # the reduce-scatter became the staged allreduce of a host copy
    dist.reduce_scatter_tensor(out, parts[RANK].to(DEV), op=dist._make_nccl_premul_sum(0.5))
    same(out, _rank_order([p * 0.5 for p in parts], torch.add).view(WORLD, m)[RANK])
    ran(3, 2, 4)


def case_intra_host_unmappable_peer():
    """Rank 0's address space is capped below what mapping its peer's tensor needs: its all_reduce fails naming the
    mapping, and rank 1 is released at once by the abandoned link instead of waiting for the timeout."""
    import resource

    warm = torch.ones(2**16, device=DEV)
    dist.all_reduce(warm)  # the link has opened its peers' memory
    big = torch.ones(2**24, device=DEV)  # 64 MiB: rank 0 maps 32 MiB of rank 1's
    start = time.time()
    if RANK == 0:
        with open("/proc/self/status") as status:
            used = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
        resource.setrlimit(resource.RLIMIT_AS, (used + (8 << 20), resource.RLIM_INFINITY))
    try:
        dist.all_reduce(big)
        raise AssertionError("the all_reduce completed")
    except RuntimeError as err:
        print(f"ERROR after {time.time() - start:.1f}s: {err}", flush=True)
        sys.exit(7)


def case_intra_host_mismatch():
    """Ranks passing different sizes are refused by every rank, and the group goes on working."""
    try:
        dist.all_reduce(torch.ones(4 + RANK, device=DEV))
        raise AssertionError("the mismatch went unnoticed")
    except RuntimeError as err:
        assert "allreduce differs between ranks" in str(err) and "ERR02200" in str(err), err
    t = torch.ones(3, device=DEV)
    dist.all_reduce(t)
    same(t, torch.full((3,), float(WORLD)))


def case_intra_host_late_rank():
    """Rank 1 arrives long after HCCL_EXEC_TIMEOUT: rank 0 times out naming it, and rank 1, arriving, finds the
    link abandoned at once."""
    if RANK == 1:
        time.sleep(6)
    _all_reduce_expecting_failure()


def case_ephemeral_timeout():
    """Base timeout 2 s (Backend._set_default_timeout). Rank 1 extends it by 6 s, and its next all_reduce waits
    4 s for rank 0 without failing; that collective finished, the extension is gone: the next 4 s wait fails."""
    import torch.distributed.distributed_c10d as c10d

    assert (
        c10d._add_ephemeral_timeout_for_all_pgs
        is torch_npu.distributed.distributed_c10d._hccl_add_ephemeral_timeout_for_all_pgs
    )
    dist.all_reduce(torch.ones(2, device=DEV))  # both ranks are connected
    dist.group.WORLD._get_backend(torch.device("npu"))._set_default_timeout(datetime.timedelta(seconds=2))
    if RANK == 0:
        time.sleep(4)
        dist.all_reduce(torch.ones(2, device=DEV))
        dist.all_reduce(torch.ones(2, device=DEV))
        time.sleep(4)
        _all_reduce_expecting_failure()
    assert c10d._add_ephemeral_timeout_for_all_pgs(datetime.timedelta(seconds=6)) is None
    start = time.time()
    t = torch.ones(2, device=DEV)
    dist.all_reduce(t)
    same(t, torch.full((2,), 2.0))
    print(f"SURVIVED {time.time() - start:.1f}s", flush=True)
    dist.all_reduce(torch.ones(2, device=DEV))  # (issued after the extended one finished: the base timeout)
    _all_reduce_expecting_failure()


def case_torch_npu_c10d():
    """Sequence numbers of an hccl group, dist.gather as an all-gather (warning the destination) or the backend's
    gather in compatible mode, gather_object over it, and the backward of the autograd all-gather on hccl."""
    import warnings

    from torch.distributed.nn.functional import _AllGatherBase

    group = dist.group.WORLD
    before = group._get_sequence_number_for_group()
    dist.all_reduce(torch.ones(2, device=DEV))
    dist.barrier()
    assert group._get_sequence_number_for_group() >= before + 1, (before, group._get_sequence_number_for_group())
    everyone = [data(r, n=3 + r) for r in range(WORLD)]  # ranks gather tensors of different sizes
    for compatible in (False, True):
        torch.npu.use_compatible_impl(compatible)
        mine = data(RANK, n=3 + RANK).to(DEV)
        dst = WORLD - 1
        gathered = [torch.zeros(3 + r, device=DEV) for r in range(WORLD)] if RANK == dst else None
        if compatible:  # the backend's gather needs equal sizes
            mine, gathered = (
                data(RANK).to(DEV),
                ([torch.zeros(6, device=DEV) for _ in range(WORLD)] if RANK == dst else None),
            )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert dist.gather(mine, gathered, dst=dst) is None
        warned = [str(w.message) for w in caught if "HCCL doesn't support gather" in str(w.message)]
        assert warned == (
            ["HCCL doesn't support gather at the moment. Implemented with allgather instead."]
            if RANK == dst and not compatible
            else []
        ), warned
        if RANK == dst:
            want = [data(r) for r in range(WORLD)] if compatible else everyone
            for got, expected in zip(gathered, want):
                same(got, expected)
    torch.npu.use_compatible_impl(False)
    objects = [None] * WORLD if RANK == 0 else None
    dist.gather_object({"rank": RANK, "items": list(range(RANK + 1))}, objects, dst=0)
    assert objects is None or objects == [{"rank": r, "items": list(range(r + 1))} for r in range(WORLD)], objects
    verify = torch_npu.distributed._verify_params_across_processes
    assert verify is torch._C._distributed_c10d._verify_params_across_processes
    verify(group, [torch.zeros(3, 2, device=DEV), torch.zeros(5, device=DEV)], None)  # same shapes: passes
    try:  # every rank compares its parameters with rank 0's (as over gloo)
        verify(group, [torch.zeros(3 + RANK, device=DEV)], None)
        assert RANK == 0, "parameters of a shape different from rank 0's passed the check"
    except RuntimeError as error:
        assert f"sizes [{3 + RANK}] appears not to match sizes of the same param in process 0" in str(error), error
    x = data(RANK, n=4).to(DEV).requires_grad_(True)
    out = torch.empty(4 * WORLD, device=DEV)
    gathered = _AllGatherBase.apply(out, x, group)
    (gathered * torch.arange(4 * WORLD, dtype=torch.float32, device=DEV)).sum().backward()
    same(x.grad, torch.arange(4 * RANK, 4 * RANK + 4, dtype=torch.float32) * WORLD)


def case_reinit():
    """A device fault and recovery: stop and restart the device, rebuild the group's link twice, resume."""
    everyone = torch.stack([data(r) for r in range(WORLD)]).sum(0)
    for step in range(3):
        t = data(RANK).to(DEV)
        dist.all_reduce(t)
        same(t, everyone)
        torch_npu.npu.stop_device(0)
        try:
            dist.reinit_process_group()
            raise AssertionError("a stopped device was reinitialised")
        except RuntimeError as err:
            assert "npu:0 is stopped; call torch_npu.npu.restart_device(0) first" in str(err), err
        torch_npu.npu.restart_device(0)
        assert dist.reinit_process_group(rebuild_link=step == 2) is (dist.group.WORLD if step == 2 else None)
        if step < 2:
            assert dist.reinit_process_group() is dist.group.WORLD
    t = data(RANK).to(DEV)
    dist.all_reduce(t)
    same(t, everyone)
    assert dist.reinit_process_group is torch_npu.distributed.reinit_process_group


def main():
    case = sys.argv[1]
    torch.npu.set_device(0)
    options = None
    if os.environ.get("OP_TIMEOUT"):
        options = torch_npu._C._distributed_c10d.ProcessGroupHCCL.Options()
        options.op_timeout = datetime.timedelta(seconds=int(os.environ["OP_TIMEOUT"]))
    dist.init_process_group("hccl", pg_options=options)
    name = f"case_{case}"
    modules = (distributed_training_cases, context_parallel_cases, silent_check_cases, moe_domain_cases,
               profiled_collective_cases, distributed_operator_cases, compiled_collective_cases)  # fmt: skip
    run = globals().get(name) or next(getattr(m, name) for m in modules if hasattr(m, name))
    run()
    dist.destroy_process_group()
    print("ok", flush=True)


if __name__ == "__main__":
    main()
