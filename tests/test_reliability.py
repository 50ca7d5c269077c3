"""What an attacker tried: every defect found is fixed here, each against the CPU's own behaviour
(the CPU raising the same error, or npu giving the CPU's bits)."""

import textwrap

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from subprocess_helpers import run_python

OVERLAP = (
    "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single "
    "memory location. Please clone() the tensor before performing the operation."
)


def _overlapping_copy(device):
    f = torch.arange(6.0, device=device)
    f[1:].copy_(f[:-1])


def _transposed_copy(device):
    m = torch.arange(9.0, device=device).view(3, 3)
    m.copy_(m.t())


def _overlapping_add_(device):
    f = torch.arange(6.0, device=device)
    f[1:].add_(f[:-1])


def _overlapping_mul_(device):
    f = torch.arange(6.0, device=device)
    f[:-1].mul_(f[1:])


def _out_overlapping_input(device):
    f = torch.arange(6.0, device=device)
    torch.add(f[:-1], 1, out=f[1:])


def _index_select_out(device):
    f = torch.arange(6.0, device=device)
    torch.index_select(f[:4], 0, torch.tensor([0, 1], device=device), out=f[1:3])


@pytest.mark.parametrize(
    "program",
    [
        _overlapping_copy,
        _transposed_copy,
        _overlapping_add_,
        _overlapping_mul_,
        _out_overlapping_input,
        _index_select_out,
    ],
)
def test_overlapping_writes_raise_as_on_the_cpu(program):
    for device in ("cpu", "npu"):
        with pytest.raises(RuntimeError) as info:
            program(device)
        assert str(info.value).startswith(OVERLAP[:60]), (device, str(info.value))


def test_full_overlap_in_place_still_works_and_lists_of_one_storage_alias():
    x = torch.arange(4.0, device="npu")
    x.add_(x)
    assert x.cpu().tolist() == [0.0, 2.0, 4.0, 6.0]
    params = [torch.ones(3, device="npu") for _ in range(20)]  # above the hashed-alias threshold
    views = [params[0][:2]] * 20
    torch._foreach_add_(params, 1.0)
    torch._foreach_mul_(views, 2.0)  # one storage twenty times, as on the CPU
    cpu_params = [torch.ones(3) for _ in range(20)]
    torch._foreach_add_(cpu_params, 1.0)
    torch._foreach_mul_([cpu_params[0][:2]] * 20, 2.0)
    assert torch.equal(params[0].cpu(), cpu_params[0])


def test_indexing_a_cpu_tensor_with_npu_indices_raises_like_pytorch():
    with pytest.raises(
        RuntimeError, match=r"^indices should be either on cpu or on the same device as the indexed " r"tensor \(cpu\)"
    ):
        torch.arange(4.0)[torch.tensor([1], device="npu")]
    assert torch.arange(4.0, device="npu")[torch.tensor([1])].device.type == "npu"  # CPU indices are allowed


def test_pin_memory_refuses_npu_tensors_in_pytorchs_words():
    with pytest.raises(RuntimeError, match=r"^cannot pin 'npuFloatType' only dense CPU tensors can be pinned"):
        torch.ones(2, device="npu").pin_memory()
    assert torch.ones(2).pin_memory().is_pinned()


def test_device_memory_info_of_an_invalid_device_raises():
    # the allocator's statistics raise its own "Invalid device argument." (test_memory.py)
    with pytest.raises(RuntimeError, match=r"^Invalid NPU device ordinal\. .*\(npu:99 was asked for"):
        torch.npu.mem_get_info(99)


def test_a_view_of_a_storage_resized_to_nothing_raises_instead_of_crashing():
    proc = run_python(
        """
        import torch, torch_npu
        a = torch.arange(100.0, device="npu")
        v = a[50:60]
        a.untyped_storage().resize_(0)
        for f in (lambda: v.sum(), lambda: v.cpu(), lambda: v + 1, lambda: v.add_(1),
                  lambda: torch.ones(10, device="npu").copy_(v)):
            try:
                f()
                print("no error")
            except RuntimeError as e:
                print(str(e).splitlines()[0])
    """,
        timeout=120,
    )
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and len(lines) == 5
    assert set(lines) == {
        "npu tensor with sizes [10], strides [1], storage offset 50, and itemsize 4 requiring a "
        "storage size of 240 is out of bounds for storage of size 0 (its storage was resized or "
        "freed under it)"
    }


def test_dtype_errors_name_the_npu_operator_not_the_cpu_kernel():
    b = torch.ones(2, 2, dtype=torch.bool, device="npu")
    with pytest.raises(NotImplementedError, match=r"^\"addmm_npu\" not implemented for 'Bool'$"):
        torch.addmm(b, b, b)
    with pytest.raises(NotImplementedError, match=r"^\"mm_npu\" not implemented for 'Bool'$"):
        b.mm(b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_dropout_takes_the_cpus_path_bit_for_bit_with_nan_inf_and_zeros(dtype, p):
    x = torch.randn(4, 9).to(dtype)
    x[0, 0], x[1, 1], x[2, 2], x[3, 3] = float("nan"), float("inf"), 0.0, -0.0
    xc, xn = x.clone().requires_grad_(), x.npu().requires_grad_()
    torch.manual_seed(3)
    a = F.dropout(xc[:, ::2], p)
    torch.manual_seed(3)
    b = F.dropout(xn[:, ::2], p)
    (a * torch.arange(a.shape[1])).sum().backward()
    (b * torch.arange(b.shape[1], device="npu")).sum().backward()
    bits = {2: torch.int16, 4: torch.int32}[x.element_size()]
    assert torch.equal(a.detach().contiguous().view(bits), b.detach().cpu().contiguous().view(bits))
    assert torch.equal(xc.grad.view(bits), xn.grad.cpu().view(bits))


@pytest.mark.parametrize(
    "optimizer",
    [
        torch.optim.ASGD,
        torch.optim.NAdam,
        torch.optim.Adam,
        torch.optim.AdamW,
        torch.optim.RAdam,
        torch.optim.Adamax,
        torch.optim.RMSprop,
        torch.optim.Rprop,
        torch.optim.Adagrad,
        torch.optim.Adadelta,
        torch.optim.SGD,
    ],
)
def test_optimizer_defaults_are_the_cpus_and_give_its_bits(optimizer):
    torch.manual_seed(0)
    model = nn.Linear(8, 4)
    model_n = nn.Linear(8, 4).npu()
    model_n.load_state_dict(model.state_dict())
    opt, opt_n = optimizer(model.parameters(), lr=0.01), optimizer(model_n.parameters(), lr=0.01)
    x = torch.randn(16, 8)
    for _ in range(5):
        for m, o, inp in ((model, opt, x), (model_n, opt_n, x.npu())):
            o.zero_grad()
            m(inp).pow(2).mean().backward()
            o.step()
    for p, q in zip(model_n.parameters(), model.parameters()):
        assert torch.equal(p.detach().cpu(), q.detach())


def test_foreach_true_still_runs_the_foreach_kernels_on_npu():
    from torch.optim.optimizer import _default_to_fused_or_foreach

    params = [torch.ones(2, device="npu", requires_grad=True)]
    assert _default_to_fused_or_foreach(params, differentiable=False, use_fused=False) == (False, False)
    opt = torch.optim.Adam(params, lr=0.1, foreach=True)
    params[0].grad = torch.ones(2, device="npu")
    opt.step()
    assert params[0].detach().cpu().tolist() == pytest.approx([0.9, 0.9])


def test_clip_grad_norm_default_is_the_cpus():
    grads = [torch.randn(5) for _ in range(3)]
    params = [torch.zeros(5, requires_grad=True) for _ in range(3)]
    params_n = [torch.zeros(5, device="npu", requires_grad=True) for _ in range(3)]
    for p, q, g in zip(params, params_n, grads):
        p.grad, q.grad = g.clone(), g.npu()
    assert torch.equal(nn.utils.clip_grad_norm_(params_n, 0.5).cpu(), nn.utils.clip_grad_norm_(params, 0.5))
    for p, q in zip(params, params_n):
        assert torch.equal(q.grad.cpu(), p.grad)


@pytest.mark.parametrize("foreach", [True, False, None])
def test_clip_grad_norm_and_value_take_foreach_as_on_the_cpu(foreach):
    # mixed dtypes and shapes: the foreach kernels group them, the loop does not
    grads = [torch.randn(5), torch.randn(3, 4), torch.randn(7, dtype=torch.float64)]
    params = [torch.zeros_like(g, requires_grad=True) for g in grads]
    params_n = [torch.zeros_like(g, device="npu", requires_grad=True) for g in grads]
    for p, q, g in zip(params, params_n, grads):
        p.grad, q.grad = g.clone(), g.npu()
    total_n = nn.utils.clip_grad_norm_(params_n, 0.5, norm_type=3.0, foreach=foreach)
    total = nn.utils.clip_grad_norm_(params, 0.5, norm_type=3.0, foreach=foreach)
    assert torch.equal(total_n.cpu(), total)
    nn.utils.clip_grad_value_(params_n, 0.01, foreach=foreach)
    nn.utils.clip_grad_value_(params, 0.01, foreach=foreach)
    for p, q in zip(params, params_n):
        assert torch.equal(q.grad.cpu(), p.grad)


def test_foreach_support_checks_treat_npu_as_the_cpu():
    from torch.utils._foreach_utils import _device_has_foreach_support, _has_foreach_support

    tensors = [torch.ones(2, device="npu")]
    assert _device_has_foreach_support(torch.device("npu")) is _device_has_foreach_support(torch.device("cpu"))
    assert _has_foreach_support(tensors, torch.device("npu")) is True


def test_lstsq_default_driver_is_the_cpus_gelsy():
    a, b = torch.randn(6, 4), torch.randn(6, 2)
    cpu, npu = torch.linalg.lstsq(a, b), torch.linalg.lstsq(a.npu(), b.npu())
    # gels (CUDA's default) returns no rank; gelsy does. LAPACK's gelsy itself varies in the last bits
    # from call to call on the CPU (workspace alignment), so values agree to rounding.
    assert npu.rank.numel() == cpu.rank.numel() == 1 and int(npu.rank) == int(cpu.rank) == 4
    torch.testing.assert_close(npu.solution.cpu(), cpu.solution, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_attention_eval_fast_path_equals_cpu(need_weights):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    mha_n = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    mha_n.load_state_dict(mha.state_dict())
    mha_n = mha_n.npu()
    q = torch.randn(2, 5, 16)
    qn = q.npu()  # one tensor for query, key and value on both devices: the kernel packs the projection then
    with torch.no_grad():
        out = mha(q, q, q, need_weights=need_weights)
        out_n = mha_n(qn, qn, qn, need_weights=need_weights)
    assert torch.equal(out_n[0].cpu(), out[0])
    assert (out[1] is None) == (out_n[1] is None)
    if out[1] is not None:
        assert torch.equal(out_n[1].cpu(), out[1])


def test_thread_stress_mixed_allocations_streams_events():
    proc = run_python(
        textwrap.dedent("""
        import threading, torch, torch_npu
        errors = []
        def work(seed):
            try:
                g = torch.Generator().manual_seed(seed)
                s = torch.npu.Stream()
                for i in range(150):
                    with torch.npu.stream(s):
                        x = torch.randn(64, 64, generator=g).npu()
                        y = (x @ x.t()).relu_().sum(0)
                        e = torch.npu.Event()
                        e.record(s)
                    e.synchronize()
                    expected = (x.cpu() @ x.cpu().t()).relu_().sum(0)
                    if not torch.equal(y.cpu(), expected):
                        errors.append(("mismatch", seed, i))
                    del x, y
                    if i % 50 == 0:
                        torch.npu.empty_cache()
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))
        threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
        [t.start() for t in threads]
        [t.join(timeout=240) for t in threads]
        print("alive", sum(t.is_alive() for t in threads), "errors", errors[:3])
        print("allocated", torch.npu.memory_allocated())
    """),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == "alive 0 errors []"
