"""AMP beyond autocast: torch_npu's GradScaler messages and overflow statics, the sharded scaler,
amp.common, and the apex-style torch_npu.contrib.amp (O0-O3, scale_loss)."""

import pytest
import torch
import torch.nn as nn
from subprocess_helpers import run_python


def test_grad_scaler_reports_scale_changes(capsys):
    p = nn.Parameter(torch.ones(2, device="npu"))
    opt = torch.optim.SGD([p], lr=0.1)
    scaler = torch.npu.amp.GradScaler(init_scale=1024.0, growth_interval=1)
    scaler.scale(p.sum())
    p.grad = torch.tensor([float("inf"), 1.0], device="npu")
    scaler.step(opt)
    scaler.update()
    assert "Loss scaler reducing loss scale to 512.0" in capsys.readouterr().out
    assert torch.equal(p.detach().cpu(), torch.ones(2)), "the inf step was skipped"
    p.grad = torch.ones(2, device="npu")
    scaler.step(opt)
    scaler.update()
    assert "Loss scaler increasing loss scale to 1024.0" in capsys.readouterr().out


def test_static_grad_scaler_never_changes_scale(capsys):
    scaler = torch.npu.amp.GradScaler(init_scale=128.0, dynamic=False)
    p = nn.Parameter(torch.ones(1, device="npu"))
    opt = torch.optim.SGD([p], lr=0.1)
    scaler.scale(p.sum())
    p.grad = torch.tensor([float("nan")], device="npu")
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 128.0 and capsys.readouterr().out == ""
    assert scaler.state_dict()["dynamic"] is False


def test_grad_scaler_overflow_statics():
    GradScaler = torch.npu.amp.GradScaler
    with pytest.raises(RuntimeError, match="Unsupport api"):
        GradScaler.get_npu_overflow_flag()
    out = run_python(
        """
        import torch, torch_npu
        S = torch.npu.amp.GradScaler
        S.clear_npu_overflow_flag()
        (torch.tensor([65000.0], device="npu", dtype=torch.float16) * 2)
        print(S.get_npu_overflow_flag())
        S.clear_npu_overflow_flag()
        print(S.get_npu_overflow_flag())
    """,
        env={"VNPU_SOC": "Ascend910A"},
    )
    assert out.stdout.split() == ["True", "False"]


def test_amp_common_and_grad_scaler_module_names():
    from torch_npu.npu.amp.common import amp_definitely_not_available
    from torch_npu.npu.amp.grad_scaler import GradScaler

    assert amp_definitely_not_available() is False
    assert GradScaler is torch.npu.amp.GradScaler
    assert (
        last_line_of(
            "import torch, torch_npu; from torch_npu.npu.amp.common import "
            "amp_definitely_not_available as f; print(f())",
            {"VNPU_DEVICE_COUNT": "0"},
        )
        == "True"
    )


def last_line_of(code, env):
    return run_python(code, env=env).stdout.strip().splitlines()[-1]


def test_sharded_grad_scaler_defaults_to_npu():
    from torch_npu.npu.amp.sharded_grad_scaler import _ShardedGradScaler

    p = nn.Parameter(torch.ones(3, device="npu"))
    scaler = _ShardedGradScaler(init_scale=4.0)
    assert scaler._device == "npu"
    scaled = scaler.scale(p.sum())
    assert scaled.device.type == "npu" and float(scaled.detach()) == 12.0


def _net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 2)).npu()


def test_contrib_amp_o0_equals_plain_training():
    from torch_npu.contrib import amp

    a, b = _net(), _net()
    oa, ob = torch.optim.SGD(a.parameters(), lr=0.1), torch.optim.SGD(b.parameters(), lr=0.1)
    with pytest.warns(UserWarning, match="vnpu extension"):
        a, oa = amp.initialize(a, oa, opt_level="O0", verbosity=0)
    x = torch.randn(4, 8, device="npu")
    for model, opt in ((a, oa), (b, ob)):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        if model is a:
            with amp.scale_loss(loss, opt) as scaled:
                scaled.backward()
        else:
            loss.backward()
        opt.step()
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p.cpu(), q.cpu())


def test_contrib_amp_o1_runs_forward_under_autocast():
    from torch_npu.contrib import amp

    model = _net()
    seen = []
    model[0].register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt = amp.initialize(model, opt, opt_level="O1", verbosity=0)
    out = model(torch.randn(4, 8, device="npu"))
    assert seen == [torch.float16] and out.dtype == torch.float32
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_contrib_amp_o2_keeps_fp32_masters_and_bn(capsys):
    from torch_npu.contrib import amp

    model = _net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt = amp.initialize(model, opt, opt_level="O2", loss_scale=128.0)
    assert "Selected optimization level O2" in capsys.readouterr().out
    assert model[0].weight.dtype == torch.float16 and model[1].weight.dtype == torch.float32
    masters = list(amp.master_params(opt))
    assert all(p.dtype == torch.float32 for p in masters)
    before = model[0].weight.detach().clone()
    x = torch.randn(4, 8, device="npu")
    out = model(x)
    assert out.dtype == torch.float32
    with amp.scale_loss(out.pow(2).mean(), opt) as scaled:
        assert float(scaled) == pytest.approx(float(out.pow(2).mean()) * 128.0, rel=1e-5)
        scaled.backward()
    opt.step()
    assert not torch.equal(model[0].weight.cpu(), before.cpu())
    assert torch.equal(model[0].weight.detach().cpu(), masters[0].detach().half().cpu())


def test_contrib_amp_dynamic_scale_skips_overflow_steps(capsys):
    from torch_npu.contrib import amp

    p = nn.Parameter(torch.ones(2, device="npu"))
    model = nn.Module()
    opt = torch.optim.SGD([p], lr=0.1)
    model, opt = amp.initialize(model, opt, opt_level="O1")
    assert amp.state_dict()["loss_scaler0"]["loss_scale"] == 65536.0
    loss = (p * torch.tensor([float("inf"), 1.0], device="npu")).sum()
    with amp.scale_loss(loss, opt) as scaled:
        scaled.backward()
    opt.step()
    assert torch.equal(p.detach().cpu(), torch.ones(2)), "overflowing step skipped"
    assert amp.state_dict()["loss_scaler0"]["loss_scale"] == 32768.0
    assert "reducing loss scale to 32768.0" in capsys.readouterr().out


def test_contrib_amp_o3_is_pure_fp16_and_bad_level_refused():
    from torch_npu.contrib import amp

    model = _net()
    model = amp.initialize(model, opt_level="O3", verbosity=0)
    assert all(p.dtype == torch.float16 for p in model.parameters())
    with pytest.raises(RuntimeError, match="Unexpected optimization level O4"):
        amp.initialize(_net(), opt_level="O4")


def test_grad_scaler_skips_every_step_of_an_iteration_once_one_optimizer_overflowed(capsys):
    scaler = torch.npu.amp.GradScaler(init_scale=4.0)
    finite = nn.Parameter(torch.ones(2, device="npu"))
    overflowing = nn.Parameter(torch.ones(2, device="npu"))
    opt_a, opt_b = torch.optim.SGD([overflowing], lr=0.5), torch.optim.SGD([finite], lr=0.5)
    scaler.scale(finite.sum())
    overflowing.grad = torch.tensor([float("inf"), 1.0], device="npu")
    finite.grad = torch.full((2,), 4.0, device="npu")
    scaler.step(opt_a)
    scaler.step(opt_b)  # its gradients are finite, but this iteration already overflowed
    assert torch.equal(finite.detach().cpu(), torch.ones(2))
    assert "Gradient overflow. Skipping step" in capsys.readouterr().out
    scaler.update()
    assert scaler.get_scale() == 2.0
    # the next iteration steps again
    finite.grad = torch.full((2,), 2.0, device="npu")
    scaler.step(opt_b)
    scaler.update()
    assert torch.equal(finite.detach().cpu(), torch.full((2,), 0.5))


def test_sharded_grad_scaler_is_torch_npus_under_both_names():
    out = run_python("""
        import torch, torch_npu
        from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
        print(ShardedGradScaler is torch_npu._ShardedGradScaler, ShardedGradScaler()._device)
    """)
    assert out.stdout.strip().splitlines()[-1] == "True npu"
