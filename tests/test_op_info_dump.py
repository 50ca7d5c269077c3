"""Operator information files (torch_npu._C._aclop_start_dump / _aclop_stop_dump, ACL's aclopStartDumpArgs)
and torch_npu's static-kernel compiler that reads them."""

import glob
import json
import logging
import os
import stat

import pytest
import torch

import torch_npu
from torch_npu._inductor import npu_static_kernel
from torch_npu._inductor.npu_static_kernel import StaticKernelCompiler, safe_resolve_output_dir

C = torch_npu._C


def _records(folder):
    return [json.load(open(p)) for p in sorted(glob.glob(os.path.join(folder, "*.json")))]


def _dumped(path, run):
    C._aclop_start_dump(str(path))
    try:
        run()
    finally:
        folder = torch_npu.npu._op_info_dump.stop()
    return folder, _records(folder)


def test_one_file_per_distinct_operator_signature(tmp_path):
    a, b = torch.randn(4, 8, device="npu"), torch.randn(8, 4, device="npu")

    def run():
        for _ in range(3):
            torch.add(torch.mm(a, b), 1, alpha=2)
        torch.mm(b, a)
        torch.cat([a, a], dim=1)

    folder, records = _dumped(tmp_path, run)
    assert os.path.dirname(folder) == str(tmp_path) and folder.endswith("_debug")
    assert [(r["op_type"], r["op"]) for r in records] == [
        ("MatMulV2", "aten::mm"),
        ("add", "aten::add.Tensor"),
        ("MatMulV2", "aten::mm"),
        ("cat", "aten::cat"),
    ]
    mm = records[0]
    assert mm["inputs"] == [
        {"name": "self", "dtype": "float32", "shape": [4, 8], "format": "ND"},
        {"name": "mat2", "dtype": "float32", "shape": [8, 4], "format": "ND"},
    ]
    assert mm["outputs"] == [{"name": "result", "dtype": "float32", "shape": [4, 4], "format": "ND"}]
    assert records[1]["attrs"] == [{"name": "alpha", "value": 2}]
    assert records[2]["inputs"][0]["shape"] == [8, 4]
    assert [t["name"] for t in records[3]["inputs"]] == ["tensors[0]", "tensors[1]"]
    assert records[3]["attrs"] == [{"name": "dim", "value": 1}]


def test_private_formats_and_rank_defaults_are_recorded(tmp_path):
    nz = torch_npu.npu_format_cast(torch.randn(32, 64, device="npu"), 29)
    image = torch.randn(2, 3, 4, 4, device="npu")
    _, records = _dumped(tmp_path, lambda: (nz * 2, image + 1))
    assert records[0]["inputs"][0]["format"] == "FRACTAL_NZ"
    assert records[1]["inputs"][0]["format"] == "NCHW"


def test_only_the_session_is_noted(tmp_path):
    x = torch.ones(3, device="npu")
    assert torch_npu.npu._op_info_dump.stop() is None  # no session: nothing to write
    x + 1
    _, records = _dumped(tmp_path, lambda: x * 2)
    x - 1
    assert [r["op"] for r in records] == ["aten::mul.Tensor"] and not C._op_info_dump_active()


def test_bad_dump_paths_raise():
    with pytest.raises(TypeError, match="^dump path must be a str, but got int"):
        C._aclop_start_dump(3)
    with pytest.raises(RuntimeError, match="^cannot create the operator dump path /dev/null/x: "):
        C._aclop_start_dump("/dev/null/x")
    assert not C._op_info_dump_active()


def test_static_kernel_compiler_without_op_compiler_keeps_the_files(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    x = torch.randn(8, 8, device="npu")
    with caplog.at_level(logging.WARNING, logger="torch_npu._inductor"):
        with StaticKernelCompiler(str(tmp_path)) as compiler:
            torch.mm(x, x).relu()
    (debug_dir,) = [d for d in compiler.result_root.iterdir() if d.name.endswith("_debug")]
    assert [r["op"] for r in _records(debug_dir)] == ["aten::mm", "aten::relu"]
    assert (
        f"no static kernels are built (vnpu runs PyTorch's CPU kernels); the operator information is in {debug_dir}"
        in caplog.text
    )


def test_static_kernel_compiler_builds_installs_and_reselects(tmp_path, monkeypatch):
    # a stand-in for CANN's op_compiler: records its arguments and leaves a package whose installer leaves a mark
    tools = tmp_path / "bin"
    tools.mkdir()
    compiler = tools / "op_compiler"
    compiler.write_text(
        "#!/bin/sh\n"
        f'echo "$@" > {tmp_path}/args\n'
        'out="$(echo "$@" | sed -e "s/.* -o //")"\n'
        f'printf "#!/bin/sh\\ntouch {tmp_path}/installed\\n" > "$out/static_kernel_x.run"\n'
        'chmod +x "$out/static_kernel_x.run"\n'
    )
    compiler.chmod(compiler.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    reselected = []
    monkeypatch.setattr(torch_npu.npu, "_aclnn_reselect_static_kernel", lambda: reselected.append(1))
    x = torch.randn(4, 4, device="npu")
    with StaticKernelCompiler(str(tmp_path)) as sk:
        x.exp()
    (debug_dir,) = [d for d in sk.result_root.iterdir() if d.name.endswith("_debug")]
    args = (tmp_path / "args").read_text().split()
    assert args == [
        "-p",
        str(debug_dir),
        "-v",
        torch_npu.npu.get_device_name(),
        "-l",
        "info",
        "-j",
        "4",
        "-o",
        str(sk.result_root),
    ]
    assert (tmp_path / "installed").exists() and reselected == [1]


def test_an_error_in_the_block_skips_compilation(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="torch_npu._inductor"):
        with pytest.raises(ValueError, match="^in the block$"):
            with StaticKernelCompiler(str(tmp_path)):
                raise ValueError("in the block")
    assert "Skipping static kernel compilation due to the error." in caplog.text
    assert not C._op_info_dump_active()


def test_build_folder_checks(tmp_path):
    with pytest.raises(ValueError, match="^build_dir must not contain '..'$"):
        safe_resolve_output_dir("a/../b")
    with pytest.raises(ValueError, match="^build_dir contains null byte$"):
        safe_resolve_output_dir("a\x00b")
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(ValueError, match="^symlink detected in path: "):
        safe_resolve_output_dir(str(tmp_path / "link" / "sub"))
    (tmp_path / "file").write_text("")
    with pytest.raises(RuntimeError, match="^failed to create output directory "):
        safe_resolve_output_dir(str(tmp_path / "file"))
    made = safe_resolve_output_dir(str(tmp_path))
    assert made.parent == tmp_path and made.name.endswith(f"_{os.getpid()}_kernel_aot_optimization_build_outputs")


def test_uninstall_runs_the_remembered_script_once(tmp_path, monkeypatch):
    script = tmp_path / "uninstall.sh"
    script.write_text(f"#!/bin/sh\necho ran >> {tmp_path}/log\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(npu_static_kernel, "_uninstall_path", str(script))
    npu_static_kernel.uninstall_static_kernel()
    npu_static_kernel.uninstall_static_kernel()  # forgotten after the first run: nothing to do
    assert (tmp_path / "log").read_text() == "ran\n" and npu_static_kernel._uninstall_path is None


def test_save_uninstall_info_finds_the_package_script(tmp_path, monkeypatch):
    found = tmp_path / "cann-9" / "opp" / "static_kernel" / "ai_core" / "pkg1"
    found.mkdir(parents=True)
    (found / "uninstall.sh").write_text("")
    monkeypatch.setenv("ASCEND_HOME_PATH", str(tmp_path / "latest"))
    npu_static_kernel.save_uninstall_info("pkg1")
    assert npu_static_kernel._uninstall_path == str(found / "uninstall.sh")
    npu_static_kernel.save_uninstall_info("missing")
    assert npu_static_kernel._uninstall_path is None
