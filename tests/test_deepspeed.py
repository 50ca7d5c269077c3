"""DeepSpeed on npu, as its users run it: with `eval "$(vnpu env)"` (CANN's variables, pointing at vnpu's
toolkit directory) DeepSpeed builds from source and runs; `get_accelerator()` is DeepSpeed's NPU
accelerator over hccl; ZeRO stages 1, 2 and 3 in fp32, bf16 and fp16 on 1 and 2 ranks train with the
losses and parameters of the same DeepSpeed program on the CPU, and fp32 ZeRO matches plain DDP."""

import glob
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("deepspeed", reason="DeepSpeed is not installed (make test installs it)")

from subprocess_helpers import checked, client_env, free_port, rank_results, run  # noqa: E402

from vnpu import env_command  # noqa: E402

LOOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clients", "deepspeed_loop.py")
RUNNER = [sys.executable, "-m", "deepspeed.launcher.runner"]
MATRIX = (
    ["ddp"]
    + [f"zero{stage}-{precision}" for precision in ("fp32", "bf16", "fp16") for stage in (1, 2, 3)]
    + ["zero2-fp32-offload", "zero3-fp32-offload"]
)


def cpu_reference_runs(runs):
    """The runs DeepSpeed's CPU accelerator can make on this host: it refuses fp16 ("Type fp16 is not supported on
    your device.") where oneDNN has no fp16 kernels for the CPU (no AVX512-FP16 / AMX-FP16), so on such hosts the
    fp16 runs have no CPU reference and are checked against DDP only."""
    from deepspeed.accelerator.cpu_accelerator import CPU_Accelerator

    return [name for name in runs if "fp16" not in name or CPU_Accelerator().is_fp16_supported()]


def cann_env(**extra):
    return client_env(**env_command.variables(), **extra)


def test_vnpu_env_prints_what_set_env_sh_sets(tmp_path):
    from subprocess_helpers import VNPU

    out = checked(run(VNPU + ["env"], client_env())).stdout
    script = tmp_path / "show.sh"
    script.write_text(out + 'echo "$ASCEND_HOME_PATH|$ASCEND_TOOLKIT_HOME|$ASCEND_OPP_PATH|$ASCEND_AICPU_PATH"\n')
    home, toolkit, opp, aicpu = checked(run(["sh", str(script)], client_env())).stdout.strip().split("|")
    assert home == toolkit == aicpu == env_command.TOOLKIT and opp == os.path.join(home, "opp")
    assert os.path.isdir(opp)
    info = open(os.path.join(home, "ascend_toolkit_install.info")).read().splitlines()
    import torch_npu

    assert f"version={torch_npu.utils.get_cann_version().split('+')[0]}" in info
    for component in ("compiler", "runtime", "opp", "hccl"):
        assert open(os.path.join(home, component, "version.info")).read().strip() == info[1].replace(
            "version", "Version"
        )
    unset = checked(run(VNPU + ["env", "--unset"], client_env())).stdout.split("\n")
    assert "unset ASCEND_HOME_PATH" in unset


@pytest.mark.long
def test_deepspeed_builds_from_source_only_with_the_cann_environment(tmp_path):
    download = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "deepspeed==0.19.8",
            "-d",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=cann_env(),  # pip prepares the archive's metadata, which runs DeepSpeed's setup.py: it needs CANN's variables
    )
    if download.returncode != 0 and not list(tmp_path.glob("deepspeed-*.tar.gz")):
        pytest.skip(
            f"DeepSpeed's source archive cannot be downloaded here: {(download.stdout + download.stderr)[-300:]}"
        )
    assert download.returncode == 0, download.stdout[-3000:] + download.stderr[-3000:]
    [sdist] = [str(p) for p in tmp_path.glob("deepspeed-*.tar.gz")]
    wheel = [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", sdist, "-w"]
    without = run(wheel + [str(tmp_path / "a")], client_env(), timeout=300)
    assert without.returncode != 0 and "KeyError: 'ASCEND_HOME_PATH'" in without.stdout + without.stderr
    checked(run(wheel + [str(tmp_path / "b")], cann_env(), timeout=300))
    assert list((tmp_path / "b").glob("deepspeed-*.whl"))


def test_the_cpu_references_shared_memory_op_is_built_by_setup():
    # make setup builds it where the suite's programs look (TORCH_EXTENSIONS_DIR, from tests/conftest.py); the ninja
    # those programs find on PATH sees nothing to do, so the CPU reference loads it without compiling
    directory = os.path.join(os.environ.get("TORCH_EXTENSIONS_DIR", "-"), "deepspeed_shm_comm")
    if not os.path.isdir(directory):
        pytest.skip("DeepSpeed's CPU op was not built in this environment (make setup builds it)")
    assert glob.glob(os.path.join(directory, "deepspeed_shm_comm*.so"))
    plan = checked(run(["ninja", "-n", "-d", "explain"], cann_env(DS_ACCELERATOR="cpu"), cwd=directory))
    assert plan.stdout.strip() == "ninja: no work to do.", plan.stdout + plan.stderr


def test_get_accelerator_is_deepspeeds_npu_accelerator():
    proc = checked(
        run(
            [
                sys.executable,
                "-c",
                "from deepspeed.accelerator import get_accelerator as g; a = g(); "
                "print(type(a).__name__, a.device_name(), a.communication_backend_name(), a.device_count())",
            ],
            cann_env(),
            timeout=300,
        )
    )
    assert proc.stdout.split()[-4:] == ["NPU_Accelerator", "npu", "hccl", "8"]


def remove_shm_allreduce_buffers(port):
    """DeepSpeed's CPU accelerator gives each rank a shared-memory allreduce buffer
    (/dev/shm/deepspeed_allreduce_buffer_<uid>_<address>_<port>_<rank>, 66 MiB) and never unlinks it; the
    buffers of one launch are found by its rendezvous port. Returns how many were removed."""
    buffers = glob.glob(f"/dev/shm/deepspeed_allreduce_buffer_{os.getuid()}_*_{port}_*")
    for path in buffers:
        os.unlink(path)
    return len(buffers)


def launch(tmp_path, name, ranks, runs, **env):
    out = str(tmp_path / name)
    port = free_port()
    try:
        checked(
            run(
                RUNNER + ["--num_gpus", str(ranks), "--master_port", str(port), LOOP, "--out", out, *runs],
                cann_env(**env),
                timeout=900,
                cwd=str(tmp_path),
            )
        )
    finally:
        removed = remove_shm_allreduce_buffers(port)
    if env.get("DS_ACCELERATOR") == "cpu":  # the CPU reference really used (and left) the buffers
        assert removed == ranks
    results = rank_results(out)
    assert len(results) == ranks, results
    return results


def launch_on_npu_and_cpu(tmp_path, ranks, runs):
    """The same launch on npu and, at the same time, on DeepSpeed's CPU accelerator (its reference runs):
    (npu results, cpu results)."""
    with ThreadPoolExecutor(2) as pool:
        npu = pool.submit(launch, tmp_path, "npu", ranks, runs)
        cpu = pool.submit(launch, tmp_path, "cpu", ranks, cpu_reference_runs(runs), DS_ACCELERATOR="cpu")
        return npu.result(), cpu.result()


def same_training(a, b):
    assert a["losses"] == b["losses"]
    assert a["params"] == b["params"]


@pytest.mark.long
def test_zero_stages_on_two_ranks_train_as_on_the_cpu(tmp_path):
    npu, cpu = launch_on_npu_and_cpu(tmp_path, 2, MATRIX)
    assert [(r["accelerator"], r["backend"], r["world_size"]) for r in npu] == [("npu", "hccl", 2)] * 2
    assert [r["backend"] for r in cpu] == ["gloo", "gloo"]
    for rank, (n, c) in enumerate(zip(npu, cpu, strict=True)):
        for name in MATRIX:
            assert n["runs"][name]["device"] == f"npu:{rank}"
        for name in cpu_reference_runs(MATRIX):
            same_training(n["runs"][name], c["runs"][name])
        for name in ("zero1-fp32", "zero2-fp32", "zero3-fp32", "zero2-fp32-offload", "zero3-fp32-offload"):
            same_training(n["runs"][name], n["runs"]["ddp"])  # ZeRO in fp32 is DDP's arithmetic
        for name in MATRIX:
            if "bf16" in name or "fp16" in name:
                assert n["runs"][name]["losses"] != n["runs"]["ddp"]["losses"]
                assert n["runs"][name]["losses"] == pytest.approx(n["runs"]["ddp"]["losses"], abs=2e-2)
    assert npu[0]["runs"]["zero3-fp16"]["optimizer"] == "DeepSpeedZeroOptimizer_Stage3"
    for name in MATRIX:
        assert npu[0]["runs"][name]["params"] == npu[1]["runs"][name]["params"]


@pytest.mark.long
def test_zero_stages_on_one_rank_train_as_on_the_cpu(tmp_path):
    runs = ["zero1-fp32", "zero2-bf16", "zero3-fp16"]
    [npu], [cpu] = launch_on_npu_and_cpu(tmp_path, 1, runs)
    assert npu["world_size"] == 1
    for name in cpu_reference_runs(runs):
        same_training(npu["runs"][name], cpu["runs"][name])
