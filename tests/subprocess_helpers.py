"""Running a snippet in a fresh interpreter: environment variables read at import time (device
count, SoC, allocator settings) and process-level behaviour (autoload, fork) need one."""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap

import pytest


def run_python(code, env=None, timeout=120, check=True):
    """Runs `code` in a new interpreter; returns the CompletedProcess (stdout, stderr, returncode)."""
    full_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VNPU_", "ASCEND_RT_", "PYTORCH_NPU_", "PYTORCH_NO_NPU", "PYTORCH_ALLOC"))
    }
    full_env.update(env or {})
    full_env.setdefault("VNPU_OPS_PROFILE", "none")  # a developer's synced profile stays out of the tests
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=full_env, capture_output=True, text=True, timeout=timeout
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"subprocess failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def last_line(proc):
    return proc.stdout.strip().splitlines()[-1]


VNPU = [sys.executable, "-m", "vnpu.cli"]


def run(args, env, timeout=300, cwd=None):
    """Runs a command with exactly `env`; returns the CompletedProcess. A command still running after
    `timeout` seconds gets SIGABRT first (Python's faulthandler then prints every thread's stack), and the
    test fails with what it printed."""
    env = dict(env, PYTHONFAULTHANDLER="1")
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            try:
                stdout, stderr = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, stderr = proc.communicate()
            raise AssertionError(
                f"{args} did not finish within {timeout} s; its output:\n{stdout[-2000:]}\n"
                f"its stacks and stderr:\n{stderr[-8000:]}"
            ) from None
    return subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)


def run_process_group(args, env, timeout):
    """Runs a command in its own process group; returns the CompletedProcess. One still running after
    `timeout` seconds is killed with every process it started, and the test fails."""
    with subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            pytest.fail(f"{args} did not finish within {timeout} s")
    return subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)


def free_port():
    """A TCP port nothing listens on now (for a launcher's rendezvous: tests run two at a time)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def client_env(**extra):
    """The environment for a third-party program run as a user would run it: this interpreter's
    scripts first on PATH (launchers such as accelerate-launch are looked up there), no vnpu settings
    of the developer's, no synced operator profile, one intra-op thread per process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VNPU_", "ASCEND_RT_", "PYTORCH_NPU_"))}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["VNPU_OPS_PROFILE"] = "none"
    env.setdefault("OMP_NUM_THREADS", "1")  # several processes per test share 2 cores: no oversubscription
    env.update(extra)
    return env


def rank_results(directory):
    """What a client program's ranks wrote into `directory` (rank<N>.json, one per rank), in rank order."""
    names = [f for f in os.listdir(directory) if f.startswith("rank") and f.endswith(".json")]
    ranks = sorted(int(f[len("rank") : -len(".json")]) for f in names)
    return [json.load(open(os.path.join(directory, f"rank{r}.json"))) for r in ranks]


def run_client(command, runs, timeout=400):
    """{run: the per-rank results} of one launch of a client program (tests/clients/*_loop.py) that makes `runs` in
    order and writes OUT/<run>/rank<N>.json; command(OUT) is its command line up to the runs."""
    with tempfile.TemporaryDirectory() as out:
        checked(run([*command(out), *runs], client_env(), timeout=timeout, cwd=out))
        return {name: rank_results(os.path.join(out, name)) for name in runs}


def checked(proc):
    """The CompletedProcess, after asserting it succeeded (its output is the failure message)."""
    assert (
        proc.returncode == 0
    ), f"{proc.args} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-8000:]}"
    return proc
