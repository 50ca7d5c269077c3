"""torch_npu.utils: combined tensors, flops counting, environment report, CANN version, thread
affinity, async saving, loading, extension building, SyncBatchNorm function, simple profiler."""

import os

import pytest
import torch
from error_cases import raises_exactly, t
from subprocess_helpers import run_python

import torch_npu
from torch_npu.utils import (
    FlopsCounter,
    get_part_combined_tensor,
    is_combined_tensor_valid,
    npu_combine_tensors,
    reset_thread_affinity,
    save_async,
    set_thread_affinity,
)


def test_combine_tensors_makes_views_of_one_buffer():
    tensors = [torch.randn(2, 3, device="npu"), torch.randn(4, device="npu"), torch.randn(1, 1, device="npu")]
    values = [t.cpu() for t in tensors]
    combined = npu_combine_tensors(tensors)
    assert combined.shape == (11,)
    assert all(torch.equal(t.cpu(), v) for t, v in zip(tensors, values))
    assert is_combined_tensor_valid(combined, tensors)
    combined.mul_(2)
    assert torch.equal(tensors[1].cpu(), values[1] * 2)
    assert torch.equal(get_part_combined_tensor(combined, 6, 4).cpu(), values[1] * 2)
    assert not is_combined_tensor_valid(combined, [torch.randn(2, 3, device="npu")])
    with pytest.raises(RuntimeError):
        get_part_combined_tensor(combined, 8, 10)


def test_combine_tensors_zeroed_and_mismatched():
    tensors = [torch.ones(3, device="npu"), torch.ones(2, device="npu")]
    combined = npu_combine_tensors(tensors, require_copy_value=False)
    assert float(combined.abs().sum()) == 0.0
    assert npu_combine_tensors([]) is None
    with pytest.raises(RuntimeError, match="one dtype"):
        npu_combine_tensors([torch.ones(1, device="npu"), torch.ones(1, device="npu", dtype=torch.half)])


def test_flops_counter_counts_matmuls_and_pauses_recording():
    counter = FlopsCounter()
    assert counter is FlopsCounter()
    a, b = torch.randn(3, 4, device="npu"), torch.randn(4, 5, device="npu")
    counter.start()
    try:
        a @ b
        assert counter.get_flops() == [120, 120]
        counter.pause()
        torch.bmm(a[None].expand(2, 3, 4), b[None].expand(2, 4, 5))
        assert counter.get_flops() == [120, 360]
        counter.resume()
        torch.nn.functional.linear(a, b.t(), torch.zeros(5, device="npu"))
        a + 1  # not a cube operator
        assert counter.get_flops() == [240, 480]
    finally:
        counter.stop()
    assert counter.get_flops() == [0, 0]
    a @ b
    assert counter.get_flops() == [0, 0]


def test_collect_env_module_prints_vnpu_facts():
    out = run_python("import runpy; runpy.run_module('torch_npu.utils.collect_env', run_name='__main__')", timeout=180)
    text = out.stdout
    assert "Torch-npu version: " + torch_npu.__version__ in text
    assert "vnpu's software NPU" in text and "Ascend910B1" in text
    from torch_npu.utils import collect_env

    info = collect_env.get_env_info()
    assert info.torch_npu_version == torch_npu.__version__ and info.cann_version.startswith("8.5.0+vnpu")
    assert collect_env.get_torch_npu_install_path() == os.path.dirname(torch_npu.__file__)


def test_get_cann_version():
    assert torch_npu.utils.get_cann_version() == "8.5.0+vnpu"
    assert torch_npu.utils.get_cann_version(module="HCCL") == "8.5.0+vnpu"


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="thread affinity needs Linux sched_setaffinity")
def test_thread_affinity_binds_the_calling_thread():
    out = run_python(
        """
        import os, threading, torch_npu
        allowed = sorted(os.sched_getaffinity(0))
        torch_npu.utils.set_thread_affinity([allowed[0], allowed[0]])
        seen = []
        t = threading.Thread(target=lambda: seen.append(sorted(os.sched_getaffinity(0))))
        t.start(); t.join()
        print(sorted(os.sched_getaffinity(0)) == [allowed[0]], seen[0] == [allowed[0]])
        torch_npu.utils.reset_thread_affinity()
        print(sorted(os.sched_getaffinity(0)) == allowed)
    """,
        env={"CPU_AFFINITY_CONF": "1"},
    )
    assert out.stdout.split() == ["True", "True", "True"]


def test_thread_affinity_validation_and_mode_off():
    with pytest.raises(ValueError, match="Invalid core range"):
        set_thread_affinity([3, 1])
    with pytest.raises(ValueError, match="Invalid core range"):
        set_thread_affinity([1, 2, 3])
    before = os.sched_getaffinity(0)
    with pytest.warns(UserWarning, match="CPU_AFFINITY_CONF"):
        set_thread_affinity([0, 0])
    assert os.sched_getaffinity(0) == before
    reset_thread_affinity()


def test_save_async_snapshots_values_at_call_time(tmp_path):
    from torch_npu.utils.serialization import _wait_for_saves, load

    model = torch.nn.Linear(4, 2).npu()
    expected = {k: v.cpu().clone() for k, v in model.state_dict().items()}
    path = tmp_path / "ckpt.pt"
    save_async(model.state_dict(), str(path), model=model)
    with torch.no_grad():
        model.weight.add_(1)  # training continues while the file is written
    _wait_for_saves()
    loaded = load(str(path))
    assert loaded["weight"].device.type == "npu"
    assert all(torch.equal(loaded[k].cpu(), v) for k, v in expected.items())
    model(torch.ones(1, 4, device="npu"))  # the wait hook removes itself


def test_load_honours_map_location(tmp_path):
    from torch_npu.utils.serialization import load

    path = tmp_path / "t.pt"
    torch.save(torch.arange(3, device="npu"), path)
    assert load(str(path), map_location="cpu").device.type == "cpu"


def test_npu_extension_adds_torch_npu_headers():
    from torch_npu.utils.cpp_extension import NpuExtension

    ext = NpuExtension("my_ops", ["my_ops.cpp"])
    root = os.path.dirname(os.path.dirname(torch_npu.__file__))
    assert root in ext.include_dirs
    assert os.path.isfile(os.path.join(root, "torch_npu", "csrc", "runtime", "Device.h"))
    assert ext.language == "c++" and ("VNPU_EXTENSION", "1") in ext.define_macros


def test_simple_profiler_writes_a_trace(tmp_path):
    from torch_npu.utils.profiler import Profile

    prof = Profile(start_step=2, profile_type="TORCH", save_path=str(tmp_path))
    assert Profile() is prof
    for _ in range(3):
        prof.start()
        torch.ones(4, device="npu").sum()
        prof.end()
    assert (tmp_path / "trace_step2.json").is_file()


# Bad input: the exact first line of the error (torch_npu's "[ERROR] ... ERRxxyyy" suffix follows it)
UTILS_ERRORS = [
    (lambda: torch_npu.utils.npu_combine_tensors([1]), TypeError, "npu_combine_tensors expects tensors, got int"),
    (
        lambda: torch_npu.utils.npu_combine_tensors([t(1), t(1, dtype=torch.float16)]),
        RuntimeError,
        "npu_combine_tensors needs tensors of one dtype on one device, got torch.float32 on npu:0 and torch.float16 on npu:0",
    ),
    (lambda: torch_npu.utils.set_thread_affinity([-1, 2]), ValueError, "Invalid core range: [-1, 2]"),
    (
        lambda: torch_npu.utils.collect_env.check_path_owner_consistent("/nonexistent"),
        RuntimeError,
        "The path does not exist: /nonexistent",
    ),
    (
        lambda: __import__("torch_npu.utils.profiler", fromlist=["x"]).Profile._cls(profile_type="GPU"),
        ValueError,
        "profile_type must be TORCH, CANN, GE or NONE, but got 'GPU'",
    ),
]


@pytest.mark.parametrize("call,kind,message", UTILS_ERRORS, ids=[c[2][:48] for c in UTILS_ERRORS])
def test_utils_error_message(call, kind, message):
    raises_exactly(call, kind, message)


def test_path_manager_checks_and_safe_helpers(tmp_path):
    import os

    from torch_npu.utils._path_manager import PathManager

    folder, file = tmp_path / "out dir", tmp_path / "f.json"
    PathManager.make_dir_safety(str(folder))
    assert folder.is_dir() and (folder.stat().st_mode & 0o777) == 0o750
    PathManager.create_file_safety(str(file))
    assert file.exists() and (file.stat().st_mode & 0o777) == 0o640
    PathManager.check_input_directory_path(str(folder))
    PathManager.check_input_file_path(str(file))
    PathManager.check_directory_path_writeable(str(folder))
    with pytest.raises(RuntimeError, match="Invalid input path is a file path"):
        PathManager.check_input_directory_path(str(file))
    with pytest.raises(RuntimeError, match="Invalid input path is a directory path"):
        PathManager.check_input_file_path(str(folder))
    with pytest.raises(RuntimeError, match="Invalid input path: "):
        PathManager.check_input_file_path(str(tmp_path / "a;rm -rf"))
    link = tmp_path / "link"
    os.symlink(folder, link)
    with pytest.raises(RuntimeError, match="soft chain"):
        PathManager.check_input_directory_path(str(link))
    with pytest.raises(RuntimeError, match="exceeds the limit"):
        PathManager.check_input_file_path("a" * 300)
    PathManager.remove_file_safety(str(file))
    PathManager.remove_path_safety(str(folder))
    assert not file.exists() and not folder.exists()
    PathManager.remove_path_safety(str(folder))  # already gone: nothing to do


def test_path_manager_refuses_to_remove_through_a_link(tmp_path):
    import os

    from torch_npu.utils._path_manager import PathManager

    target = tmp_path / "kept.txt"
    target.write_text("x")
    link = tmp_path / "link.txt"
    os.symlink(target, link)
    with pytest.raises(RuntimeError) as info:
        PathManager.remove_file_safety(str(link))
    assert str(info.value).split("\n")[0] == f"Failed to remove file: {link}"
    assert "ERR00009 PTA resource unavailable" in str(info.value) and target.exists()
