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


@pytest.fixture(scope="module")
def shared_libraries():
    """torch._inductor.aot_compile's shared library of one small model, compiled for each device."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 4), nn.Tanh()).eval()
    x = torch.randn(3, 8)
    libraries = {}
    with torch.no_grad():
        for device in ("cpu", "npu"):
            module = model.to(device)
            program = torch.export.export(module, (x.to(device),))
            libraries[device] = torch._inductor.aot_compile(program.module(), (x.to(device),))
    return model.to("npu"), x, libraries


def test_aot_load_runs_a_shared_library_on_npu(shared_libraries):
    model, x, libraries = shared_libraries
    expected = torch._export.aot_load(libraries["cpu"], "cpu")(x)
    for device in ("npu", "npu:0"):
        out = torch._export.aot_load(libraries["npu"], device)(x.npu())
        assert out.device == torch.device("npu", 0)
        assert torch.equal(out.cpu(), expected)


def test_npu_runner_constants_are_npu_tensors_and_take_npu_updates(shared_libraries):
    model, x, libraries = shared_libraries
    runner = torch._C._aoti.AOTIModelContainerRunnerNpu(libraries["npu"], 1, "npu:0")
    names = runner.get_constant_names_to_original_fqns()
    constants = runner.extract_constants_map(False)
    assert set(constants) == set(names.values()) and "0.weight" in constants
    for fqn, value in constants.items():
        assert value.device == torch.device("npu", 0)
        assert torch.equal(value.cpu(), model.state_dict()[fqn].cpu())
    runner.update_constant_buffer({name: torch.zeros_like(constants[fqn]) for name, fqn in names.items()}, False, True)
    (out,) = runner.run([x.npu()])
    assert out.device == torch.device("npu", 0)
    assert torch.equal(out.cpu(), torch.tanh(model[0].bias.detach().cpu()).expand(3, 4))


def test_npu_runner_refuses_other_devices(shared_libraries):
    _, _, libraries = shared_libraries
    with pytest.raises(RuntimeError) as raised:
        torch._C._aoti.AOTIModelContainerRunnerNpu(libraries["npu"], 1, "cpu")
    assert str(raised.value).startswith("AOTIModelContainerRunnerNpu runs models on npu, not on cpu\n")
    assert "ERR00001 PTA invalid parameter" in str(raised.value)


def test_the_npu_model_leaves_the_shared_cpu_model_files_as_they_are():
    # The CPU model of an npu graph is the CPU model of the same CPU graph, in the same inductor cache directory:
    # the npu metadata is a file of its own, or a CPU package made at the same time would say npu (and vice versa).
    import json
    import os

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 4), nn.Tanh()).eval().npu()
    x = torch.randn(3, 8).npu()
    with torch.no_grad():
        program = torch.export.export(model, (x,))
        files = torch._inductor.aot_compile(program.module(), (x,), options={"aot_inductor.package": True})
    metadata = [f for f in files if isinstance(f, str) and f.endswith("_metadata.json")]
    assert metadata
    for path in metadata:
        with open(path) as f:
            assert json.load(f)["AOTI_DEVICE_KEY"] == "npu"
        directory, name = os.path.split(path)
        assert os.path.basename(directory) == "npu"
        with open(os.path.join(os.path.dirname(directory), name)) as f:
            assert json.load(f)["AOTI_DEVICE_KEY"] == "cpu"
