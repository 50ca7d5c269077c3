"""AOTInductor on npu: torch._inductor.aoti_compile_and_package of an exported npu model, loaded with
aoti_load_package, computes what the same package compiled for the CPU computes, on npu memory."""

import textwrap

import pytest
import torch
import torch.nn as nn
from subprocess_helpers import run_python

import torch_npu  # noqa: F401


class ConvHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn, self.fc = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.Linear(8, 5)

    def forward(self, x, scale):
        features = torch.relu(self.bn(self.conv(x)))
        return {"logits": self.fc(features.mean((2, 3))) * scale, "features": features, "first_channel": x[:, :1]}


def _inputs(batch, device):
    generator = torch.Generator().manual_seed(batch)
    return torch.randn(batch, 3, 8, 8, generator=generator).to(device), torch.tensor(1.5).to(device)


def _package(device, path):
    torch.manual_seed(0)
    model = ConvHead().eval().to(device)
    batch = torch.export.Dim("batch", min=1, max=16)
    with torch.no_grad():
        program = torch.export.export(model, _inputs(2, device), dynamic_shapes={"x": {0: batch}, "scale": None})
        return torch._inductor.aoti_compile_and_package(program, package_path=str(path))


@pytest.fixture(scope="module")
def packages(tmp_path_factory):
    directory = tmp_path_factory.mktemp("aoti")
    return {device: _package(device, directory / f"{device}.pt2") for device in ("cpu", "npu")}


@pytest.mark.parametrize("batch", [2, 5])
def test_npu_package_equals_the_cpu_package(packages, batch):
    on_cpu = torch._inductor.aoti_load_package(packages["cpu"])(*_inputs(batch, "cpu"))
    x, scale = _inputs(batch, "npu")
    on_npu = torch._inductor.aoti_load_package(packages["npu"])(x, scale)
    assert on_npu.keys() == on_cpu.keys()
    for name, expected in on_cpu.items():
        assert on_npu[name].device == torch.device("npu", 0)
        assert torch.equal(on_npu[name].cpu(), expected), name
    # a view of an input is returned as a view of the npu input, as the card's runner returns it
    assert on_npu["first_channel"].data_ptr() == x.data_ptr()


def test_package_metadata_names_npu(packages):
    loader = torch._C._aoti.AOTIModelPackageLoader(packages["npu"], "model", False, 1, -1)
    assert loader.get_metadata()["AOTI_DEVICE_KEY"] == "npu"
    assert (
        torch._C._aoti.AOTIModelPackageLoader(packages["cpu"], "model", False, 1, -1).get_metadata()["AOTI_DEVICE_KEY"]
        == "cpu"
    )


def test_outputs_are_npu_memory_from_the_device_pools(packages):
    model = torch._inductor.aoti_load_package(packages["npu"], device_index=0)
    x, scale = _inputs(4, "npu")
    before = torch.npu.memory_allocated()
    out = model(x, scale)
    grown = torch.npu.memory_allocated() - before
    assert grown >= out["features"].numel() * 4 + out["logits"].numel() * 4
    del out
    assert torch.npu.memory_allocated() == before


def test_cpu_inputs_are_refused_with_torch_npus_error(packages):
    model = torch._inductor.aoti_load_package(packages["npu"])
    x, scale = _inputs(2, "npu")
    with pytest.raises(RuntimeError) as raised:
        model(x.cpu(), scale)
    assert str(raised.value).startswith(
        "The AOTInductor model was compiled for npu, but its input 0 is on cpu. Move the inputs to npu before calling it."
    )
    assert "ERR00001 PTA invalid parameter" in str(raised.value)
    assert torch.equal(model(x, scale)["first_channel"].cpu(), x[:, :1].cpu())  # the model still runs


def test_package_loads_in_a_new_process(packages):
    expected = torch._inductor.aoti_load_package(packages["cpu"])(*_inputs(3, "cpu"))["logits"]
    code = textwrap.dedent(f"""
        import torch
        generator = torch.Generator().manual_seed(3)
        x = torch.randn(3, 3, 8, 8, generator=generator).npu()
        model = torch._inductor.aoti_load_package({str(packages["npu"])!r})
        logits = model(x, torch.tensor(1.5).npu())["logits"]
        print(logits.device, logits.cpu().tolist())
    """)
    out = run_python(code, timeout=240).stdout.strip().splitlines()[-1]
    device, values = out.split(" ", 1)
    assert device == "npu:0"
    assert torch.equal(torch.tensor(eval(values)), expected)
