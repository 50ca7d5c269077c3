"""Automatic mixed precision on npu: torch_npu's autocast policy and the gradient scalers."""

import pytest
import torch


def mats(dtype=torch.float32):
    torch.manual_seed(0)
    return torch.randn(4, 4, device="npu", dtype=dtype), torch.randn(4, 4, device="npu", dtype=dtype)


def test_default_autocast_dtype_is_float16():
    a, b = mats()
    with torch.npu.amp.autocast():
        assert (a @ b).dtype == torch.float16
    with torch.autocast("npu"):
        assert torch.get_autocast_dtype("npu") == torch.float16
        assert torch.npu.amp.autocast().fast_dtype == torch.float16


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_torch_npu_op_lists(dtype):
    a, b = mats()
    half = a.to(dtype)
    with torch.autocast("npu", dtype=dtype):
        assert (a @ b).dtype == dtype  # lower precision list
        assert torch.nn.functional.linear(a, b).dtype == dtype
        assert torch.nn.functional.conv2d(a[None, None], b[None, None]).dtype == dtype
        assert torch.exp(half).dtype == torch.float32  # fp32 list
        assert torch.nn.functional.layer_norm(half, (4,)).dtype == torch.float32
        assert torch.softmax(half, 0).dtype == torch.float32  # fp32_set_opt_dtype
        assert torch.sum(half).dtype == torch.float32
        assert torch.addcmul(a, half, half).dtype == torch.float32  # promote
        assert (a + b).dtype == torch.float32  # not listed: unchanged
        # Where torch_npu's lists differ from CUDA's:
        assert torch.linalg.vecdot(a, b).dtype == torch.float32  # CUDA casts it, torch_npu does not
        assert torch.nn.functional.rms_norm(half, (4,)).dtype == dtype  # CUDA forces fp32, torch_npu does not


def test_autocast_results_equal_manual_casts():
    a, b = mats()
    with torch.autocast("npu", dtype=torch.bfloat16):
        auto = a @ b
    assert torch.equal(auto.cpu(), (a.bfloat16() @ b.bfloat16()).cpu())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        on_cpu = a.cpu() @ b.cpu()
    assert torch.equal(auto.cpu(), on_cpu)


def test_binary_cross_entropy_is_banned_under_autocast():
    p = torch.rand(4, device="npu")
    with torch.autocast("npu"):
        with pytest.raises(RuntimeError) as info:
            torch.nn.functional.binary_cross_entropy(p, p)
    assert str(info.value).startswith(
        "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to " "autocast."
    )


def train(device, scaler_factory, steps=6, poison=(2,)):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = scaler_factory()
    data = torch.randn(steps, 16, 8)
    scales = []
    for step in range(steps):
        opt.zero_grad()
        loss = model(data[step].to(device)).float().pow(2).mean()
        if step in poison:
            loss = loss * float("inf")
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return model.weight.detach().cpu(), scales


def test_grad_scaler_matches_cpu_and_skips_inf_steps():
    npu_w, npu_scales = train("npu", lambda: torch.amp.GradScaler("npu", init_scale=2.0**8))
    cpu_w, cpu_scales = train("cpu", lambda: torch.amp.GradScaler("cpu", init_scale=2.0**8))
    assert npu_scales == cpu_scales
    assert npu_scales[2] == npu_scales[1] / 2  # backoff after the inf step
    assert torch.equal(npu_w, cpu_w)


def test_torch_npu_grad_scaler():
    weights, scales = train("npu", lambda: torch.npu.amp.GradScaler(init_scale=2.0**8, growth_interval=2))
    ref, ref_scales = train("npu", lambda: torch.amp.GradScaler("npu", init_scale=2.0**8, growth_interval=2))
    assert scales == ref_scales and torch.equal(weights, ref)
    static_w, static_scales = train(
        "npu", lambda: torch.npu.amp.GradScaler(init_scale=2.0**8, dynamic=False), poison=()
    )
    assert static_scales == [2.0**8] * 6
    scaler = torch.npu.amp.GradScaler()
    state = scaler.state_dict()
    assert state["dynamic"] is True and state["scale"] == 2.0**16
    other = torch.npu.amp.GradScaler(dynamic=False)
    other.load_state_dict(state)
    assert other._dynamic is True


def test_custom_fwd_and_bwd():
    class Square(torch.autograd.Function):
        @staticmethod
        @torch.npu.amp.custom_fwd(cast_inputs=torch.float32)
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @torch.npu.amp.custom_bwd
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    x = torch.ones(3, device="npu", dtype=torch.float16, requires_grad=True)
    with torch.npu.amp.autocast():
        y = Square.apply(x)
    assert y.dtype == torch.float32
    y.sum().backward()
    assert x.grad.cpu().tolist() == [2.0, 2.0, 2.0]
