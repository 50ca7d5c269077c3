"""The vnpu command line."""

import subprocess
import sys

VNPU = [sys.executable, "-m", "vnpu.cli"]


def test_info_names_the_devices():
    out = subprocess.run(VNPU + ["info"], capture_output=True, text=True, timeout=120, check=True).stdout
    assert "8 x Ascend910B1: 64 GiB, 24 cube / 48 vector cores, L2 192 MiB, bf16 yes" in out


def test_demo_trains_and_matches_cpu():
    proc = subprocess.run(VNPU + ["demo", "--steps", "10"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "training on npu:0" in proc.stdout
    assert "same program on cpu: losses bit-identical" in proc.stdout
    assert "[2/2] Small CNN, Adam, AMP (bf16 autocast + GradScaler), 10 steps" in proc.stdout
    assert "MiB reserved of 64 GiB" in proc.stdout
