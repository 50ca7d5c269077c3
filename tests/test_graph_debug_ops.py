"""torch_npu's graph DFX operators: print_npugraph_tensor and save_npugraph_tensor act at each replay of the graph
that captured them (with the tensor's contents at that moment), and at once outside a capture."""

import os

import torch

import torch_npu


def _capture(fn):
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        fn()
    return g


def test_print_shows_the_contents_at_each_replay_not_at_capture(capsys):
    x = torch.arange(6, dtype=torch.float32, device="npu").reshape(2, 3)
    g = _capture(lambda: torch.ops.npu.print_npugraph_tensor(x, tensor_name="x"))
    assert capsys.readouterr().out == ""
    x.add_(1)
    g.replay()
    assert capsys.readouterr().out == (
        "x=tensor([[1., 2., 3.],\n        [4., 5., 6.]]), shape=(2, 3), dtype=torch.float32\n"
    )
    torch_npu.print_npugraph_tensor(x[0])  # eager, no name
    assert capsys.readouterr().out == "tensor([1., 2., 3.]), shape=(3,), dtype=torch.float32\n"


def test_save_writes_numbered_files_per_path_or_overwrites_one(tmp_path):
    x = torch.arange(6, dtype=torch.float32, device="npu").reshape(2, 3)
    y = torch.ones(2, 2, dtype=torch.float16, device="npu")
    path = str(tmp_path / "tensor.pt")
    g = _capture(lambda: torch.ops.npu.save_npugraph_tensor(x, save_path=path))
    assert os.listdir(tmp_path) == []
    g.replay()
    x.mul_(2)
    g.replay()
    assert torch.equal(torch.load(tmp_path / "tensor_device_0_0.pt"), torch.arange(6.0).reshape(2, 3))
    assert torch.equal(torch.load(tmp_path / "tensor_device_0_1.pt"), torch.arange(6.0).reshape(2, 3) * 2)
    fixed = str(tmp_path / "fixed.pt")
    g = _capture(lambda: torch.ops.npu.save_npugraph_tensor.tensor_list([x, y], save_path=fixed, overwrite=True))
    g.replay()
    saved = torch.load(tmp_path / "fixed_device_0.pt")
    assert torch.equal(saved[0], x.cpu()) and torch.equal(saved[1], y.cpu())
    y.zero_()
    g.replay()
    assert torch.equal(torch.load(tmp_path / "fixed_device_0.pt")[1], torch.zeros(2, 2, dtype=torch.float16))
    assert sorted(os.listdir(tmp_path)) == ["fixed_device_0.pt", "tensor_device_0_0.pt", "tensor_device_0_1.pt"]


def test_save_defaults_to_tensor_pt_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    torch.ops.npu.save_npugraph_tensor(torch.ones(3, device="npu"))
    [name] = os.listdir(tmp_path)
    assert name.startswith("tensor_device_0_") and name.endswith(".pt")
    assert torch.equal(torch.load(tmp_path / name), torch.ones(3))
