"""Collectives inside torch.compile'd (inductor) code on npu, one rank's part (distributed_worker.py runs it):
each compiled function gives, bit for bit, what the same function gives in eager mode on every rank. The
computations around the collectives are exact in both (inductor's vectorised transcendental functions
round differently from ATen's, on the CPU as on npu)."""

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc
from distributed_rank import DEV, RANK, WORLD


def _compiled_equals_eager(fn, *inputs):
    torch._dynamo.reset()
    eager = fn(*inputs)
    compiled = torch.compile(fn, backend="inductor", fullgraph=True)(*inputs)
    for got, want in zip(
        compiled if isinstance(compiled, tuple) else (compiled,), eager if isinstance(eager, tuple) else (eager,)
    ):
        assert got.device.type == "npu", got.device
        assert torch.equal(got.cpu(), want.cpu()), (fn.__name__, got, want)


def all_reduce_between_computations(x):
    return fc.all_reduce(x * 3 - 2, "sum", dist.group.WORLD).relu() + 1


def gather_scatter_and_exchange(x):
    gathered = fc.all_gather_single(x * 2, 0, dist.group.WORLD)
    scattered = fc.reduce_scatter_single(gathered + 1, "sum", 0, dist.group.WORLD)
    exchanged = fc.all_to_all_single(x.abs(), None, None, dist.group.WORLD)
    sent = fc.broadcast(x - RANK, 1, dist.group.WORLD)
    return gathered.sum(0), scattered * 0.5, exchanged, sent


def coalesced(x, y):
    a, b = fc.all_reduce_coalesced([x + 1, y * 2], "max", dist.group.WORLD)
    c, d = fc.all_gather_single_coalesced([x, y], dist.group.WORLD)
    e, f = fc.reduce_scatter_single_coalesced([x, c], "sum", [0, 0], dist.group.WORLD)
    return a - b.max(), c, d, e, f


def uneven_all_to_all(x):
    splits = [1 + r for r in range(WORLD)]  # rank r sends r + 1 rows to each rank
    out_splits = [1 + RANK] * WORLD
    return fc.all_to_all_single(x[: sum(splits)] * 2, out_splits, splits, dist.group.WORLD) + 1


def case_compiled_collectives():
    torch.manual_seed(RANK)
    x = torch.randn(WORLD * 4, 3, device=DEV)
    y = torch.randn(5, device=DEV)
    _compiled_equals_eager(all_reduce_between_computations, x)
    _compiled_equals_eager(gather_scatter_and_exchange, x)
    _compiled_equals_eager(coalesced, x, y)
    _compiled_equals_eager(uneven_all_to_all, torch.randn(sum(1 + r for r in range(WORLD)), 2, device=DEV))


def case_compiled_tensor_parallel_training():
    """A column- then row-parallel MLP (DTensor) trained with its forward and backward compiled by inductor:
    the collectives DTensor inserts run in the compiled graphs; the weights equal the eager run's."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("npu", (WORLD,))
    weights = []
    for compiled in (False, True):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8)).to(DEV)
        parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        step_model = torch.compile(model, backend="inductor") if compiled else model
        torch._dynamo.reset()
        for step in range(3):
            torch.manual_seed(100 + step)
            x = torch.randn(4, 8, device=DEV)
            opt.zero_grad()
            step_model(x).square().sum().backward()
            opt.step()
        weights.append([p.full_tensor().cpu() for p in model.parameters()])
    for eager, compiled in zip(*weights):
        assert torch.equal(eager, compiled), (eager - compiled).abs().max()
