"""One rank of a multi-process hccl test (tests/test_distributed.py starts WORLD_SIZE of them).

    python distributed_worker.py CASE     (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment)

Every rank builds every rank's inputs from the rank number, so each result is checked against a
reference computed here, exactly; a failed check raises (non-zero exit)."""

import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

import torch_npu

RANK, WORLD = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
DEV = torch.device("npu", 0)


def data(rank, n=6, dtype=torch.float32):
    return (torch.arange(n, dtype=torch.float64) * (rank + 1) + rank - 2.5).to(dtype)


def same(got, want):
    got = got.cpu()
    assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want), (got, want)


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
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    same(incoming, everyone[prv])
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


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


def _batches():
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(4 * WORLD, 8, generator=g), torch.randn(4 * WORLD, 3, generator=g)) for _ in range(3)]


def _train_on_this_ranks_shards(model, opt):
    for x, y in _batches():
        mine = slice(4 * RANK, 4 * (RANK + 1))
        loss = torch.nn.functional.mse_loss(model(x[mine].to(DEV)), y[mine].to(DEV))
        opt.zero_grad()
        loss.backward()
        opt.step()


def _trained_on_the_full_batches_on_cpu():
    """The single-process reference: the same model and SGD steps over the whole batches."""
    reference = _model()
    opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for x, y in _batches():
        loss = torch.nn.functional.mse_loss(reference(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return reference


def case_ddp():
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(_model().to(DEV), device_ids=[0])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    _train_on_this_ranks_shards(model, opt)
    reference = _trained_on_the_full_batches_on_cpu()
    for got, want in zip(model.module.parameters(), reference.parameters()):
        torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-5, atol=1e-6)
    # no_sync: gradients stay local (this rank's batch only), the next synced backward averages
    x, y = _batches()[0]
    mine = slice(4 * RANK, 4 * (RANK + 1))
    opt.zero_grad()
    with model.no_sync():
        torch.nn.functional.mse_loss(model(x[mine].to(DEV)), y[mine].to(DEV)).backward()
    local = [p.grad.detach().cpu().clone() for p in model.module.parameters()]
    copy = _model()
    copy.load_state_dict({k: v.cpu() for k, v in model.module.state_dict().items()})
    torch.nn.functional.mse_loss(copy(x[mine]), y[mine]).backward()
    for got, want in zip(local, copy.parameters()):
        torch.testing.assert_close(got, want.grad, rtol=1e-5, atol=1e-6)
    # find_unused_parameters: a branch this step does not use
    branchy = _Branchy().to(DEV)
    ddp = DDP(branchy, device_ids=[0], find_unused_parameters=True)
    ddp(torch.ones(2, 4, device=DEV), use_second=False).sum().backward()
    assert branchy.second.weight.grad is None and branchy.first.weight.grad is not None


class _Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.second = torch.nn.Linear(4, 2), torch.nn.Linear(4, 2)

    def forward(self, x, use_second):
        return self.second(x) if use_second else self.first(x)


def case_syncbn():
    torch.manual_seed(0)
    x = torch.randn(4 * WORLD, 3, 5, 5)
    weight = torch.randn(4 * WORLD, 3, 5, 5)  # d loss / d out
    mine = slice(4 * RANK, 4 * (RANK + 1))
    bn = torch.nn.SyncBatchNorm(3).to(DEV)
    local = x[mine].to(DEV).requires_grad_()
    out = bn(local)
    (out * weight[mine].to(DEV)).sum().backward()
    full = x.clone().requires_grad_()
    reference_bn = torch.nn.BatchNorm2d(3)
    reference = reference_bn(full)
    (reference * weight).sum().backward()
    torch.testing.assert_close(out.detach().cpu(), reference[mine].detach(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(local.grad.cpu(), full.grad[mine], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(bn.running_mean.cpu(), reference_bn.running_mean, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(bn.running_var.cpu(), reference_bn.running_var, rtol=1e-4, atol=1e-6)
    # SyncBatchNorm sums the parameter gradients of the local batch; DDP would add them across ranks
    grads = [bn.weight.grad.clone(), bn.bias.grad.clone()]
    for g in grads:
        dist.all_reduce(g)
    torch.testing.assert_close(grads[0].cpu(), reference_bn.weight.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(grads[1].cpu(), reference_bn.bias.grad, rtol=1e-4, atol=1e-4)


def case_fsdp2():
    from torch_npu.distributed.fsdp import fully_shard

    model = _model().to(DEV)
    for layer in (model[0], model[2]):
        fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    _train_on_this_ranks_shards(model, opt)
    reference = _trained_on_the_full_batches_on_cpu()
    for got, want in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(got.full_tensor().detach().cpu(), want.detach(), rtol=1e-5, atol=1e-6)


def case_fsdp1():
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    model = FSDP(_model().to(DEV), device_id=DEV, use_orig_params=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    _train_on_this_ranks_shards(model, opt)
    reference = _trained_on_the_full_batches_on_cpu()
    with FSDP.summon_full_params(model):
        for got, want in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-5, atol=1e-6)


def case_dtensor():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("npu", (WORLD,))
    full = torch.arange(8 * WORLD, dtype=torch.float32).view(4 * WORLD, 2)
    sharded = distribute_tensor(full.to(DEV), mesh, [Shard(0)])
    assert sharded.to_local().shape == (4, 2) and sharded.to_local().device.type == "npu"
    same(sharded.full_tensor(), full)
    same((sharded * 2).redistribute(mesh, [Replicate()]).to_local(), full * 2)
    same(sharded.sum().full_tensor(), full.sum())


def case_dtensor_npu_operators():
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("npu", (WORLD,))
    torch.manual_seed(0)  # every rank builds the same full tensors
    x, gamma = torch.randn(2 * WORLD, 3, 8), torch.rand(8) + 0.5
    y, rstd = torch_npu.npu_rms_norm(x.to(DEV), gamma.to(DEV))
    for dim in (0, 1):
        dy, drstd = torch_npu.npu_rms_norm(
            distribute_tensor(x.to(DEV), mesh, [Shard(dim)]), distribute_tensor(gamma.to(DEV), mesh, [Replicate()])
        )
        assert dy.placements == (Shard(dim),) and drstd.placements == (Shard(dim),), (dy.placements, drstd.placements)
        same(dy.full_tensor(), y.cpu())
        same(drstd.full_tensor(), rstd.cpu())
    q, cos, sin = torch.randn(2, 2 * WORLD, 2, 8), torch.randn(1, 2 * WORLD, 1, 8), torch.randn(1, 2 * WORLD, 1, 8)
    want = torch_npu.npu_rotary_mul(q.to(DEV), cos.to(DEV), sin.to(DEV)).cpu()
    for dim, table in ((0, Replicate()), (1, Shard(1))):
        got = torch_npu.npu_rotary_mul(
            distribute_tensor(q.to(DEV), mesh, [Shard(dim)]),
            distribute_tensor(cos.to(DEV), mesh, [table]),
            distribute_tensor(sin.to(DEV), mesh, [table]),
        )
        assert got.placements == (Shard(dim),), got.placements
        same(got.full_tensor(), want)


def case_checkpoint():
    import torch.distributed.checkpoint as dcp

    path = os.environ["CHECKPOINT_DIR"]
    model = _model().to(DEV)
    dcp.save({"model": model.state_dict()}, checkpoint_id=path)
    other = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).to(DEV)
    assert not torch.equal(other[0].weight.detach().cpu(), model[0].weight.detach().cpu())  # the load must change it
    state = {"model": other.state_dict()}
    dcp.load(state, checkpoint_id=path)
    other.load_state_dict(state["model"])
    pairs = list(zip(model.parameters(), other.parameters()))
    assert len(pairs) == 4
    for a, b in pairs:
        same(b.detach().cpu(), a.detach().cpu())


def case_pipeline():
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    full = _model()
    stage_module = full[0:2] if RANK == 0 else full[2:]
    stage = PipelineStage(stage_module.to(DEV), RANK, WORLD, DEV)
    schedule = ScheduleGPipe(stage, n_microbatches=2, loss_fn=lambda out, y: torch.nn.functional.mse_loss(out, y))
    x, y = _batches()[0]
    if RANK == 0:
        schedule.step(x.to(DEV))
    else:
        losses = []
        schedule.step(target=y.to(DEV), losses=losses)
        assert len(losses) == 2, losses  # one loss per microbatch
        want = [
            torch.nn.functional.mse_loss(_model()(x[i * 4 : (i + 1) * 4]), y[i * 4 : (i + 1) * 4]) for i in range(2)
        ]
        for got, w in zip(losses, want):
            torch.testing.assert_close(got.detach().cpu(), w.detach(), rtol=1e-5, atol=1e-6)


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


def case_profiled_collectives():
    """A profiled step with one all_reduce of 4096 float32 (16 KiB) and a 1 KiB send from rank 0 to rank 1,
    written under PROFILE_DIR (as PROFILE_EXPORT: text or db) for msprof-analyze."""
    config = torch_npu.profiler._ExperimentalConfig(export_type=os.environ.get("PROFILE_EXPORT", "text"))
    with torch_npu.profiler.profile(
        activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU],
        schedule=torch_npu.profiler.schedule(wait=0, warmup=0, active=1, repeat=1),
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(os.environ["PROFILE_DIR"]),
        experimental_config=config,
    ) as prof:
        x = torch.randn(64, 64).to(DEV)  # a host-to-device copy
        t = (x @ x).reshape(-1)
        dist.all_reduce(t)
        message = torch.ones(256, device=DEV)
        if RANK == 0:
            dist.send(message, dst=1)
        elif RANK == 1:
            dist.recv(message, src=0)
        prof.step()
    print("ok")


def case_profiled_database():
    """A matmul and six all_reduces the last rank joins 200 ms late (far above scheduling noise on a loaded
    machine), profiled into PROFILE_DIR as databases."""
    config = torch_npu.profiler._ExperimentalConfig(export_type="db")
    with torch_npu.profiler.profile(
        activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU],
        schedule=torch_npu.profiler.schedule(wait=0, warmup=0, active=1, repeat=1),
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(os.environ["PROFILE_DIR"]),
        experimental_config=config,
    ) as prof:
        x = torch.randn(32, 32).to(DEV)
        x = x @ x
        for _ in range(6):
            if RANK == WORLD - 1:
                time.sleep(0.2)
            dist.all_reduce(torch.ones(4096).to(DEV))
        prof.step()
    print("ok")


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


def case_moe_distribute():
    """npu_moe_distribute_dispatch / _combine (+ _v2, combine_add_rms_norm): the rows each rank receives, its
    counts, and the combined result of an "expert" that scales its rows, against the routing written out over
    every rank's inputs."""
    hcom = dist.group.WORLD._get_backend(DEV).get_hccl_comm_name(RANK)
    experts, local, bs, k, h = 2 * WORLD, 2, 3, 2, 8

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

    try:  # float8 moves as bytes (the gathers above) but is never reduced
        dist.all_reduce(a[RANK].to(DEV))
        raise AssertionError("a float8 all_reduce was accepted")
    except RuntimeError as err:
        assert "HCCL does not reduce Float8_e4m3fn tensors" in str(err), err


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


def main():
    case = sys.argv[1]
    torch.npu.set_device(0)
    options = None
    if os.environ.get("OP_TIMEOUT"):
        options = torch_npu._C._distributed_c10d.ProcessGroupHCCL.Options()
        options.op_timeout = datetime.timedelta(seconds=int(os.environ["OP_TIMEOUT"]))
    dist.init_process_group("hccl", pg_options=options)
    globals()[f"case_{case}"]()
    dist.destroy_process_group()
    print("ok", flush=True)


if __name__ == "__main__":
    main()
