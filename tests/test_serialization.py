"""torch.save / torch.load of npu tensors and state_dicts, with every map_location form."""

import io
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from torch_npu._patches.legacy_serialization import LEGACY_SAVE_WARNING


def saved(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return buffer


@pytest.fixture
def checkpoint():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2).npu(1)
    return {"sd": model.state_dict(), "t": torch.arange(4.0, device="npu:2"), "cpu": torch.ones(2)}


def test_round_trip_keeps_devices_and_values(checkpoint):
    loaded = torch.load(saved(checkpoint))
    assert loaded["sd"]["weight"].device == torch.device("npu", 1)
    assert loaded["t"].device == torch.device("npu", 2)
    assert loaded["cpu"].device == torch.device("cpu")
    assert torch.equal(loaded["t"].cpu(), torch.arange(4.0))
    assert torch.equal(loaded["sd"]["bias"].cpu(), checkpoint["sd"]["bias"].cpu())


@pytest.mark.parametrize(
    "map_location,expected",
    [
        ("cpu", {"t": "cpu", "w": "cpu"}),
        ("npu:3", {"t": "npu:3", "w": "npu:3"}),
        (torch.device("npu", 0), {"t": "npu:0", "w": "npu:0"}),
        ({"npu:2": "npu:0", "npu:1": "cpu"}, {"t": "npu:0", "w": "cpu"}),
        (lambda storage, location: storage, {"t": "cpu", "w": "cpu"}),
        (lambda storage, location: storage.npu(5), {"t": "npu:5", "w": "npu:5"}),
    ],
)
def test_map_location_forms(checkpoint, map_location, expected):
    loaded = torch.load(saved(checkpoint), map_location=map_location)
    assert str(loaded["t"].device) == expected["t"]
    assert str(loaded["sd"]["weight"].device) == expected["w"]
    assert torch.equal(loaded["t"].cpu(), torch.arange(4.0))


def test_cpu_checkpoint_loads_onto_npu_and_into_a_model():
    model = torch.nn.Linear(3, 2)
    loaded = torch.load(saved(model.state_dict()), map_location="npu")
    target = torch.nn.Linear(3, 2).npu()
    target.load_state_dict(loaded)
    assert torch.equal(target.weight.cpu(), model.weight)


def test_views_saved_together_share_storage_after_load():
    base = torch.arange(6.0, device="npu")
    loaded = torch.load(saved({"base": base, "view": base[2:4]}))
    loaded["view"].fill_(-1)
    assert loaded["base"].cpu().tolist() == [0.0, 1.0, -1.0, -1.0, 4.0, 5.0]


def test_weights_only_load_and_legacy_storage():
    obj = {"x": torch.randn(3, device="npu"), "n": 3}
    loaded = torch.load(saved(obj), weights_only=True)
    assert torch.equal(loaded["x"].cpu(), obj["x"].cpu())
    storage = torch.load(saved(torch.ones(3, device="npu").untyped_storage()))
    assert storage.device == torch.device("npu", 0)


def test_loading_onto_a_missing_device_is_a_clear_error(checkpoint):
    with pytest.raises(RuntimeError) as info:
        torch.load(saved(checkpoint), map_location="npu:9")
    assert str(info.value) == (
        "Attempting to deserialize object on NPU device 9 but torch.npu.device_count() is 8. "
        "Please use torch.load with map_location to map your storages to an existing device."
    )


def test_legacy_save_prints_torch_npus_warning_once_and_saves():
    script = textwrap.dedent(
        """
        import io, torch, torch_npu
        for _ in range(2):
            buffer = io.BytesIO()
            torch.save(torch.arange(3.0).npu(), buffer, _use_new_zipfile_serialization=False)
            buffer.seek(0)
            print(torch.load(buffer).cpu().tolist())
        """
    )
    for env, printed in (({}, 1), ({"TORCH_NPU_WARNING_DISABLE": "1"}, 0)):
        done = subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines.count(LEGACY_SAVE_WARNING) == printed
        assert lines[-2:] == ["[0.0, 1.0, 2.0]"] * 2
