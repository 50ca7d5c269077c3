"""Moving a module between cpu and npu keeps its Parameter objects, as between cpu and cuda.

Optimizers, hooks and libraries (accelerate's `prepare` moves the model after the optimizer exists)
hold the Parameter objects; if a move replaced them, the optimizer would step tensors nobody uses.
"""

import pytest
import torch
import torch.nn as nn


def small_net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))


def ids(module):
    """Parameters keep their objects; buffers are replaced by _apply on every device, cuda included."""
    return [id(p) for p in module.parameters()]


@pytest.mark.parametrize(
    "move",
    [
        lambda m: m.to("npu"),
        lambda m: m.npu(),
        lambda m: m.to(torch.device("npu", 0)),
        lambda m: m.to("npu:1"),
        lambda m: m._apply(lambda t: t.to("npu")),
    ],
    ids=["to_str", "npu", "to_device", "to_npu1", "_apply"],
)
def test_moving_to_npu_keeps_parameter_objects(move):
    net = small_net()
    before = ids(net)
    first = net[0].weight
    moved = move(net)
    assert moved is net
    assert ids(net) == before
    assert net[0].weight is first and isinstance(first, nn.Parameter)
    assert first.device.type == "npu" and net[1].running_mean.device.type == "npu"


def test_moving_back_to_cpu_keeps_objects_and_values():
    net = small_net()
    before, values = ids(net), [p.detach().clone() for p in net.parameters()]
    net.npu()
    net.cpu()
    assert ids(net) == before
    assert all(p.device.type == "cpu" for p in net.parameters())
    for p, v in zip(net.parameters(), values, strict=True):
        assert torch.equal(p, v)


def test_gradients_move_with_their_parameters():
    net = small_net()
    net(torch.randn(4, 6)).sum().backward()
    grads = [p.grad for p in net.parameters()]
    expected = [g.clone() for g in grads]
    net.to("npu")
    for p, g, e in zip(net.parameters(), grads, expected, strict=True):
        assert p.grad is g and g.device.type == "npu"
        assert torch.equal(g.cpu(), e)


def test_dtype_and_device_together_keep_objects():
    net = small_net()
    before = ids(net)
    net.to("npu", torch.float64)
    assert ids(net) == before
    assert net[0].weight.dtype == torch.float64 and net[0].weight.device.type == "npu"


@pytest.mark.parametrize("src,dst", [("cpu", "npu"), ("npu", "cpu"), ("npu", "npu:1")])
def test_setting_data_across_devices_keeps_the_parameter(src, dst):
    p = nn.Parameter(torch.arange(4.0, device=src))
    p.data = torch.full((4,), 7.0, device=dst)
    assert isinstance(p, nn.Parameter) and p.requires_grad
    assert p.device == torch.device(dst if ":" in dst else f"{dst}:0" if dst == "npu" else dst)
    assert p.tolist() == [7.0] * 4
    (p * 2).sum().backward()
    assert p.grad.device == p.device and p.grad.tolist() == [2.0] * 4


def test_shallow_copy_compatibility_answers_like_cuda():
    compatible = torch._has_compatible_shallow_copy_type
    cpu, npu = torch.ones(2), torch.ones(2, device="npu")
    assert compatible(cpu, npu) and compatible(npu, cpu) and compatible(npu, npu)
    assert compatible(npu, torch.ones(2, device="npu:1"))
    assert not compatible(npu, torch.ones(2).to_sparse())
    assert not compatible(torch.ones(2).to_sparse(), npu)


def test_load_state_dict_into_npu_model_copies_in_place():
    source = small_net()
    for p in source.parameters():
        p.data.add_(1.0)
    net = small_net().npu()
    before = ids(net)
    net.load_state_dict(source.state_dict())
    assert ids(net) == before
    assert all(p.device.type == "npu" for p in net.parameters())
    for p, q in zip(net.parameters(), source.parameters(), strict=True):
        assert torch.equal(p.cpu(), q)


def test_load_state_dict_assign_takes_the_given_tensors():
    source = small_net().npu()
    net = small_net()
    net.load_state_dict(source.state_dict(), assign=True)
    assert net[0].weight.device.type == "npu"
    assert net[0].weight.data_ptr() == source[0].weight.data_ptr()


def test_swap_tensors_future_flag_moves_in_place():
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:
        net = small_net()
        before = ids(net)
        net.to("npu")
        assert ids(net) == before and net[0].weight.device.type == "npu"
    finally:
        torch.__future__.set_swap_module_params_on_conversion(False)


def test_overwrite_future_flag_replaces_parameters_as_on_cuda():
    torch.__future__.set_overwrite_module_params_on_conversion(True)
    try:
        net = small_net()
        first = net[0].weight
        net.to("npu")
        assert net[0].weight is not first and first.device.type == "cpu"
    finally:
        torch.__future__.set_overwrite_module_params_on_conversion(False)


def train(device, optimizer, steps=6, amp_dtype=None, move_first=False):
    """By default the loop of accelerate's documentation: the optimizer exists before the model moves."""
    net = small_net()
    if move_first:
        net.to(device)
    opt = optimizer(net.parameters())
    net.to(device)
    scaler = torch.amp.GradScaler(device.split(":")[0]) if amp_dtype == torch.float16 else None
    g = torch.Generator().manual_seed(1)
    losses = []
    for _ in range(steps):
        x, y = torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g)
        x, y = x.to(device), y.to(device)
        with torch.autocast(device.split(":")[0], dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            loss = nn.functional.cross_entropy(net(x), y)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)  # raises "No inf checks were recorded" if opt holds other tensors
            scaler.update()
        opt.zero_grad()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in net.parameters()]


@pytest.mark.parametrize(
    "optimizer",
    [
        lambda ps: torch.optim.AdamW(ps, lr=1e-2),
        lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
        lambda ps: torch.optim.Adam(ps, lr=1e-2, foreach=False),
    ],
    ids=["adamw", "sgd_momentum", "adam_for_loop"],
)
def test_optimizer_built_before_the_move_trains_the_npu_model(optimizer):
    initial = [p.detach().clone() for p in small_net().parameters()]
    npu_losses, npu_params = train("npu", optimizer)
    cpu_losses, cpu_params = train("cpu", optimizer)
    assert any(not torch.equal(a, b) for a, b in zip(npu_params, initial, strict=True))
    assert npu_losses == cpu_losses
    for a, b in zip(npu_params, cpu_params, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("amp_dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_optimizer_built_before_the_move_trains_with_amp(amp_dtype):
    # Autocast's npu policy is torch_npu's, not the CPU's, so the reference is the same AMP program
    # with the model moved before the optimizer was built.
    initial = [p.detach().clone() for p in small_net().parameters()]
    adamw = lambda ps: torch.optim.AdamW(ps, lr=1e-2)  # noqa: E731
    losses, params = train("npu", adamw, amp_dtype=amp_dtype)
    ref_losses, ref_params = train("npu", adamw, amp_dtype=amp_dtype, move_first=True)
    assert losses == ref_losses
    for a, b, c in zip(params, ref_params, initial, strict=True):
        assert torch.equal(a, b) and not torch.equal(a, c)
