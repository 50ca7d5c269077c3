"""The cases of tests/distributed_worker.py that train on npu across ranks (DDP, SyncBatchNorm, FSDP1 / FSDP2,
DTensor, distributed checkpoint, pipelining in export and FX modes), each compared with single-process training on the CPU."""

import os

import torch
import torch.distributed as dist
from distributed_rank import DEV, RANK, WORLD, same
from pipeline_models import GatedNet

import torch_npu


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


def case_pipeline_fx():
    """torch_npu's pipeline(mode="fx") on a model torch.export rejects: two stages trained with GPipe, their
    gradients equal to the model's on the CPU (microbatch losses backpropagated one by one, then averaged)."""
    from torch.distributed.pipelining import ScheduleGPipe, SplitPoint

    from torch_npu.distributed.pipelining import pipeline

    x, y = _batches()[0]
    spec = {"layers.2": SplitPoint.BEGINNING}
    try:
        pipeline(GatedNet().to(DEV), (x[:4].to(DEV),), split_spec=spec)
        raise AssertionError("torch.export captured a data-dependent branch")
    except RuntimeError as err:
        assert "cannot capture your model as a full graph" in str(err), err
    pipe = pipeline(GatedNet().to(DEV), (x[:4].to(DEV),), split_spec=spec, mode="fx", atomic_units=["layers.1"])
    assert pipe.num_stages == WORLD == 2
    stage = pipe.build_stage(RANK, DEV)
    mse = torch.nn.functional.mse_loss
    schedule = ScheduleGPipe(stage, n_microbatches=2, loss_fn=mse)
    reference = GatedNet()
    want_losses = [mse(reference(x[i * 4 : (i + 1) * 4]), y[i * 4 : (i + 1) * 4]) for i in range(2)]
    for loss in want_losses:
        loss.backward()
    want_grads = {name.replace(".", "_", 1): p.grad / 2 for name, p in reference.named_parameters()}
    if RANK == 0:
        schedule.step(x.to(DEV))
    else:
        losses = []
        schedule.step(target=y.to(DEV), losses=losses)
        for got, want in zip(losses, want_losses, strict=True):
            torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=0, atol=1e-6)
    names = [name for name, _ in stage.submod.named_parameters()]
    assert names == (
        ["layers_0.weight", "layers_0.bias", "layers_1.lin.weight", "layers_1.lin.bias"]
        if RANK == 0
        else ["scale", "layers_2.weight", "layers_2.bias", "layers_3.weight", "layers_3.bias"]
    ), names
    for name, p in stage.submod.named_parameters():
        assert p.device == DEV
        torch.testing.assert_close(p.grad.cpu(), want_grads[name], rtol=0, atol=1e-6)


def _attention_and_grads(q, k, v, heads, layout, fa, **kwargs):
    """fa's outputs and input gradients for q/k/v (DTensors or not), full tensors on the CPU."""
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    out, smax, ssum, *_ = fa(*leaves, heads, layout, scale=0.25, **kwargs)
    out.backward(torch.ones_like(out))
    full = [t.full_tensor() if hasattr(t, "full_tensor") else t for t in (out, smax, ssum, *(x.grad for x in leaves))]
    return [t.detach().cpu() for t in full], out


def case_dtensor_fusion_attention():
    """npu_fusion_attention (and _v3) on DTensors sharded over the batch or the heads: every output and gradient
    equals the operator on the whole tensors, and the outputs stay sharded where the inputs were."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("npu", (WORLD,))
    torch.manual_seed(0)
    b, n, s, d = 2 * WORLD, 2 * WORLD, 8, 4
    bnsd = [torch.randn(b, n, s, d) for _ in range(3)]
    layouts = {
        "BNSD": lambda t: t,
        "BSND": lambda t: t.transpose(1, 2).contiguous(),
        "BSH": lambda t: t.transpose(1, 2).reshape(b, s, n * d),
        "SBH": lambda t: t.permute(2, 0, 1, 3).reshape(s, b, n * d),
    }
    masks = [{}, {"atten_mask": torch.rand(b, 1, s, s) > 0.7}]  # none, and [B, 1, S, S]
    for fa in (torch_npu.npu_fusion_attention, torch_npu.npu_fusion_attention_v3):
        for layout, to_layout in layouts.items():
            q, k, v = (to_layout(t).to(DEV) for t in bnsd)
            for mask in masks:
                kwargs = {name: m.to(DEV) for name, m in mask.items()}
                want, _ = _attention_and_grads(q, k, v, n, layout, fa, **kwargs)
                dims = {"batch": layout.index("B")}
                if "N" in layout:
                    dims["heads"] = layout.index("N")
                for what, dim in dims.items():
                    sharded = [distribute_tensor(t, mesh, [Shard(dim)]) for t in (q, k, v)]
                    got, out = _attention_and_grads(*sharded, n, layout, fa, **kwargs)
                    assert out.placements == (Shard(dim),), (layout, what, out.placements)
                    for g, w in zip(got, want):
                        same(g, w)
    # dropout ties the shards' masks to the whole tensor: computed replicated
    q, k, v = (distribute_tensor(t.to(DEV), mesh, [Shard(0)]) for t in bnsd)
    out, *_ = torch_npu.npu_fusion_attention(q, k, v, n, "BNSD", keep_prob=0.5, seed=3)
    assert out.placements == (Replicate(),), out.placements
