"""GradScaler's unscale on saturation-mode SoCs (VNPU_SOC=Ascend910A): torch._amp_foreach_non_finite_check_and_unscale_
reads the float-status register, as torch_npu's kernel there does; on inf/NaN SoCs (the default) it is PyTorch's."""

import json

import pytest
import torch
from subprocess_helpers import run_python

SATURATION = {"VNPU_SOC": "Ascend910A"}


def _run(code, env=SATURATION):
    return json.loads(run_python(code, env=env).stdout.strip().splitlines()[-1])


def test_an_overflow_anywhere_counts_and_leaves_the_gradients_scaled():
    out = _run(
        """
        import json, warnings, torch, torch_npu
        grads = [torch.full((3, 3), 4.0, device="npu"), torch.full((2,), 8.0, device="npu")]
        found, inv = torch.zeros(1, device="npu"), torch.full((1,), 0.25, device="npu")
        torch_npu.npu_clear_float_status(torch.zeros(8, device="npu"))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            (torch.full((2,), 60000.0, device="npu", dtype=torch.float16) * 4)  # overflows, not a gradient
            torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv)
            first = [found.item(), grads[0][0, 0].item(), grads[1][0].item()]
            torch._amp_foreach_non_finite_check_and_unscale_(grads, found, inv)  # the status was cleared
        messages = [str(w.message) for w in caught]
        print(json.dumps([first, [found.item(), grads[0][0, 0].item(), grads[1][0].item()], messages]))
        """
    )
    assert out[0] == [1.0, 4.0, 8.0]
    assert out[1] == [1.0, 1.0, 2.0]
    assert out[2].count("Non finite check and unscale on NPU device!") == 1


def test_without_overflow_the_gradients_are_unscaled_as_on_the_cpu():
    out = _run(
        """
        import json, torch, torch_npu
        torch.manual_seed(0)
        cpu = [torch.randn(5, 4), torch.randn(7).half()[:3].float()]
        npu = [g.npu() for g in cpu]
        torch_npu.npu_clear_float_status(torch.zeros(8, device="npu"))
        found, inv = torch.zeros(1, device="npu"), torch.full((1,), 0.125, device="npu")
        torch._amp_foreach_non_finite_check_and_unscale_(npu, found, inv)
        torch._amp_foreach_non_finite_check_and_unscale_(cpu, torch.zeros(1), torch.full((1,), 0.125))
        print(json.dumps([found.item(), all(torch.equal(a.cpu(), b) for a, b in zip(npu, cpu))]))
        """
    )
    assert out == [0.0, True]


def test_non_finite_check_reads_and_clears_the_status():
    out = _run(
        """
        import json, torch, torch_npu
        g = [torch.ones(4, device="npu")]
        torch_npu.npu_clear_float_status(torch.zeros(8, device="npu"))
        before = torch.ops.npu._amp_foreach_non_finite_check(g)
        torch.full((1,), float("inf"), device="npu") * 2
        print(json.dumps([before, torch.ops.npu._amp_foreach_non_finite_check(g),
                          torch.ops.npu._amp_foreach_non_finite_check(g)]))
        """
    )
    assert out == [False, True, False]


def test_bad_arguments_get_torch_npus_errors():
    out = _run(
        """
        import json, torch, torch_npu
        found, inv = torch.zeros(1, device="npu"), torch.ones(1, device="npu")
        torch_npu.npu_clear_float_status(torch.zeros(8, device="npu"))
        calls = [
            lambda: torch._amp_foreach_non_finite_check_and_unscale_(
                [torch.ones(2, device="npu"), torch.ones(2, device="npu").half()], found, inv),
            lambda: torch._amp_foreach_non_finite_check_and_unscale_([torch.ones(2, device="npu")], found,
                                                                     torch.ones(2, device="npu")),
            lambda: torch._amp_foreach_non_finite_check_and_unscale_([torch.ones(2, device="npu")], found,
                                                                     torch.ones(1, dtype=torch.int32, device="npu")),
            lambda: torch._amp_foreach_non_finite_check_and_unscale_([torch.ones(2, device="npu")], found,
                                                                     torch.ones(1)),
            lambda: torch._amp_foreach_non_finite_check_and_unscale_([torch.ones(2, device="npu"), torch.ones(2)],
                                                                     found, inv),
            lambda: torch._amp_foreach_non_finite_check_and_unscale_(
                [torch.ones(2, device="npu:0"), torch.ones(2, device="npu:1")], found, inv),
        ]
        messages = []
        for call in calls:
            try:
                call()
            except RuntimeError as e:
                messages.append(str(e).splitlines()[0])
        print(json.dumps(messages))
        """
    )
    assert out == [
        "scaled_grads must have the same dtype.",
        "inv_scale must be a 1-element tensor",
        "inv_scale must be a float tensor",
        "inv_scale must be NPU-Tensor",
        "one of scaled_grads was not a NPU tensor.",
        "scaled_grads must be on the same device.",
    ]


def test_inf_nan_socs_keep_pytorchs_unscale():
    grads = [torch.full((3,), 4.0, device="npu"), torch.tensor([1.0, float("inf")], device="npu")]
    cpu = [g.cpu() for g in grads]
    found = torch.zeros(1, device="npu")
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found, torch.full((1,), 0.5, device="npu"))
    cpu_found = torch.zeros(1)
    torch._amp_foreach_non_finite_check_and_unscale_(cpu, cpu_found, torch.full((1,), 0.5))
    assert found.item() == cpu_found.item() == 1.0
    assert all(torch.equal(a.cpu(), b) for a, b in zip(grads, cpu))


@pytest.mark.parametrize("soc", ["Ascend910A", "Ascend910B1"])
def test_torch_npus_own_grad_scaler_trains_through_an_overflow(soc):
    out = _run(
        """
        import json, torch, torch_npu
        p = torch.nn.Parameter(torch.ones(2, device="npu"))
        opt = torch.optim.SGD([p], lr=0.5)
        scaler = torch.npu.amp.GradScaler(init_scale=2.0 ** 16)
        torch_npu.npu_clear_float_status(torch.zeros(8, device="npu"))
        scales = []
        for value in (float("inf"), 1.0):
            opt.zero_grad()
            scaler.scale((p * value).sum()).backward()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
        print(json.dumps([scales, p.detach().cpu().tolist()]))
        """,
        env={"VNPU_SOC": soc},
    )
    assert out == [[2.0**15, 2.0**15], [0.5, 0.5]]


def test_the_first_step_sees_an_overflow_from_before_any_float_status_call():
    """The register records from device initialisation: GradScaler's first step skips as a CPU GradScaler does."""
    program = """
        import json, torch, torch_npu
        device = "{device}"
        torch.manual_seed(0)
        model = torch.nn.Linear(2, 1).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 16)
        for x in (torch.full((4, 2), 3e34), torch.ones(4, 2)):  # the first step's scaled gradients overflow
            opt.zero_grad()
            scaler.scale(model(x.to(device)).sum()).backward()
            scaler.step(opt)
            scaler.update()
        print(json.dumps([scaler.get_scale(), model.weight.detach().cpu().tolist(), model.bias.detach().cpu().tolist()]))
        """
    npu = _run(program.format(device="npu"))
    cpu = _run(program.format(device="cpu"), env={"ASCEND_RT_VISIBLE_DEVICES": ""})
    assert npu == cpu
    assert npu[0] == 2.0**15


@pytest.mark.parametrize(("soc", "flagged"), [("Ascend910A", 1.0), ("Ascend910B1", 0.0)])
def test_the_status_watch_starts_at_initialisation_only_on_saturation_mode_socs(soc, flagged):
    out = _run(
        """
        import json, torch, torch_npu
        doubled = torch.tensor([40000.0], dtype=torch.float16).npu() * 2  # overflows before any status call
        status = torch_npu.npu_alloc_float_status(torch.zeros(8).npu())
        print(json.dumps(torch_npu.npu_get_float_status(status).cpu()[0].item()))
        """,
        env={"VNPU_SOC": soc},
    )
    assert out == flagged
