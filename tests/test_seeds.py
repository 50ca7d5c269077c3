"""The code samples of the seed documents run on vnpu (see examples/seed_000/README.md for the
samples that are not code). Each runs in a fresh interpreter, as a user would run it."""

import os
import sys

import pytest
from subprocess_helpers import run_python

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(HERE), "examples")
SEED0 = os.path.join(EXAMPLES, "seed_000")


def run_sample(name, env=None, prelude=""):
    path = os.path.join(SEED0, name)
    return run_python(
        f"""
        import sys, runpy
        sys.path.insert(0, {HERE!r})
        {prelude}
        runpy.run_path({path!r}, run_name="__main__")
    """,
        env=env,
        timeout=300,
    )


def extension_warnings(proc):
    return [line for line in proc.stderr.splitlines() if "is a vnpu extension absent from torch_npu" in line]


def test_s01_verify():
    out = run_sample("s01_verify.py").stdout
    assert "Using device: npu:0" in out and "tensor(" in out


def test_s02_resnet50_with_apex_style_amp_o2():
    pytest.importorskip("torchvision", reason="torchvision is not installed (make test installs it)")
    proc = run_sample(
        "s02_resnet50_amp.py",
        prelude="from torchvision_models import use_initialised_weights; " "use_initialised_weights()",
    )
    assert "Selected optimization level O2" in proc.stdout and "loss=" in proc.stdout
    assert any("torch_npu.contrib.amp" in line for line in extension_warnings(proc))


def test_s03_dataloader_with_workers_and_pinned_memory():
    assert float(run_sample("s03_dataloader.py").stdout.split()[-1]) == 8 * sum(range(256))


def test_s04_compile_mode_and_internal_format():
    assert run_sample("s04_fusion_config.py").stdout.split() == ["False", "True"]


@pytest.mark.parametrize(
    "name,names",
    [
        ("s05_memory_config.py", ["enable_auto_memory_optimize", "max_workspace_size"]),
        ("s08_bn_config.py", ["bn_folding", "bn_impl_mode"]),
        ("s10_kv_cache.py", ["enable_kv_cache", "kv_cache_size"]),
    ],
)
def test_config_names_of_the_article_warn_once_each(name, names):
    warnings_ = extension_warnings(run_sample(name))
    assert len(warnings_) == len(names)
    assert all(any(f"torch.npu.config.{n}" in w for w in warnings_) for n in names)


def test_s06_custom_relu6():
    proc = run_sample("s06_custom_relu6.py")
    assert proc.stdout.strip() == "[0.0, 1.0, 5.0, 6.0] [0.0, 1.0, 1.0, 0.0]"
    assert any("torch_npu.npu_relu6" in w for w in extension_warnings(proc))


def test_s07_sync_batchnorm():
    proc = run_sample("s07_syncbn.py")
    assert proc.stdout.strip() == "SyncBatchNorm (2, 8, 6, 6)"
    assert any("torch_npu.nn.SyncBatchNorm" in w for w in extension_warnings(proc))


def test_s09_fused_attention():
    proc = run_sample("s09_fused_attention.py")
    assert proc.stdout.strip() == "(5, 2, 16)"
    assert any("torch_npu.nn.FusedAttention" in w for w in extension_warnings(proc))


def test_s11_precompile_and_the_dockerfile_environment():
    env = {
        "NPU_COMPILE_MODE": "O2",
        "NPU_AUTO_MEMORY_OPTIMIZE": "1",
        "NPU_COMPILER_CACHE_SIZE": "1073741824",
        "NPU_FORCE_FP16": "1",
    }
    proc = run_sample("s11_docker_precompile.py", env=env)
    warned = " ".join(extension_warnings(proc))
    for name in ("torch_npu.npu.precompile", *env):
        assert name in warned, name


def test_ci_yaml_one_liner():
    proc = run_python("import torch; import torch_npu; print(torch_npu.npu.is_available())")
    assert proc.stdout.strip() == "True"


def test_seed_003_install_check_and_training_example():
    proc = run_python("import torch, torch_npu; print(torch.npu.is_available(), torch.npu.device_count())")
    assert proc.stdout.split() == ["True", "8"]
    out = run_python(
        f"import runpy; runpy.run_path({os.path.join(EXAMPLES, 'seed_003_tinynet.py')!r}, " "run_name='__main__')"
    ).stdout
    assert out.count("step=") == 2


def test_s12_msprof_lines_run_as_written(tmp_path):
    """4.2's two msprof commands, verbatim, in a shell whose `python` and `msprof` are this install's."""
    import glob
    import shutil
    import subprocess

    for name in ("s12_msprof.sh", "train.py"):
        shutil.copy(os.path.join(SEED0, name), tmp_path)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, command in (("python", sys.executable), ("msprof", f"{sys.executable} -m vnpu.msprof")):
        (bindir / name).write_text(f'#!/bin/sh\nexec {command} "$@"\n')
        (bindir / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VNPU_PROFILE")}
    env.update(PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}", VNPU_OPS_PROFILE="none")
    proc = subprocess.run(["bash", "s12_msprof.sh"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("step=") == 8
    (page,) = glob.glob(str(tmp_path / "prof_data" / "*_ascend_pt" / "report.html"))
    assert "Top operators by device time" in open(page).read()
