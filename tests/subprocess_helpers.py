"""Running a snippet in a fresh interpreter: environment variables read at import time (device
count, SoC, allocator settings) and process-level behaviour (autoload, fork) need one. Snippets and other
`python` commands run in a forked child of an interpreter that has imported torch (preloaded_interpreter.py)
whenever that child starts as a fresh interpreter would for them, and in a new interpreter otherwise."""

import atexit
import importlib.util
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading

import pytest


def snippet_env():
    """This process's environment without the developer's vnpu, device and allocator settings or synced profile."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VNPU_", "ASCEND_RT_", "PYTORCH_NPU_", "PYTORCH_NO_NPU", "PYTORCH_ALLOC"))
    }
    env.setdefault("VNPU_OPS_PROFILE", "none")
    return env


def run_python(code, env=None, timeout=120, check=True):
    """Runs `code` as `python -c` would in a new interpreter; returns the CompletedProcess (stdout, stderr,
    returncode)."""
    full_env = dict(snippet_env(), **(env or {}))
    args = [sys.executable, "-c", textwrap.dedent(code)]
    child = _preloaded_child(args, full_env)
    if child is None:
        proc = subprocess.run(args, env=full_env, capture_output=True, text=True, timeout=timeout)
    else:
        if child.wait(timeout) is None:
            child.send_signal(signal.SIGKILL)
            child.wait(None)
            raise subprocess.TimeoutExpired(args, timeout, *child.output())
        proc = subprocess.CompletedProcess(args, child.returncode, *child.output())
    if check and proc.returncode != 0:
        raise AssertionError(f"subprocess failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


class _PreloadedInterpreter:
    """A running preloaded_interpreter.py of this process, for commands with one startup environment."""

    SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "preloaded_interpreter.py")

    def __init__(self, env):
        from preloaded_interpreter import AUTOLOAD

        self.socket = os.path.join(tempfile.mkdtemp(prefix="vnpu-preloaded-"), "socket")
        self.running = 0  # commands started and not yet waited for
        self.server = subprocess.Popen(
            [sys.executable, self.SERVER, self.socket],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=dict(env, **{AUTOLOAD: "0"}),
            text=True,
        )
        assert self.server.stdout.readline().strip() == "ready", "the preloaded interpreter did not start"

    def close(self):
        self.server.stdin.close()
        self.server.wait(timeout=30)
        shutil.rmtree(os.path.dirname(self.socket), ignore_errors=True)


class _PreloadedChild:
    """`python ARGS` running in a child of a preloaded interpreter: subprocess.Popen's pid, send_signal and
    returncode, wait(timeout) (None while it runs), and output(): its (stdout, stderr) once it has ended."""

    def __init__(self, interpreter, args, env, cwd, session):
        self.interpreter, self.args, self.returncode = interpreter, args, None
        self.scratch = tempfile.mkdtemp(prefix="vnpu-child-")
        self.files = [os.path.join(self.scratch, name) for name in ("stdout", "stderr")]
        self.connection = socket.socket(socket.AF_UNIX)
        self.connection.connect(interpreter.socket)
        request = {"argv": args[1:], "env": env, "cwd": cwd or os.getcwd(), "stdout": self.files[0]}
        request.update(stderr=self.files[1], session=session)
        self.connection.sendall(json.dumps(request).encode() + b"\n")
        self.lines = self.connection.makefile()
        self.pid = int(self.lines.readline())
        interpreter.running += 1

    def wait(self, timeout):
        if self.returncode is None and select.select([self.connection], [], [], timeout)[0]:
            self.returncode = int(self.lines.readline())
            self.interpreter.running -= 1
            self.connection.close()
        return self.returncode

    def send_signal(self, sig):
        if self.returncode is None:
            os.kill(self.pid, sig)

    def output(self):
        texts = [open(path).read() if os.path.exists(path) else "" for path in self.files]
        shutil.rmtree(self.scratch, ignore_errors=True)
        return texts


_preloaded = {}  # startup key -> _PreloadedInterpreter, least recently used first
_startup_keys_seen = set()
_preloaded_lock = threading.Lock()
_MAX_PRELOADED = 8  # idle ones beyond are ended, least recently used first (each holds torch: about 250 MB)


@atexit.register
def _close_preloaded():
    for interpreter in _preloaded.values():
        interpreter.close()


def _preloaded_child(args, env, cwd=None, session=False):
    """`args` started in a child of the preloaded interpreter for `env`'s startup environment, or None where it
    needs a fresh interpreter: it is not `python` running code, a module or a script, torch would read `env`
    differently at import, or `env`'s startup environment is new (an interpreter is preloaded for the second
    command that shares it)."""
    from preloaded_interpreter import runs_as_command, startup_key

    key = startup_key(env)
    if args[0] != sys.executable or not runs_as_command(args[1:]) or key is None:
        return None
    with _preloaded_lock:
        if key not in _startup_keys_seen:
            _startup_keys_seen.add(key)
            return None
        interpreter = _preloaded.pop(key, None)
        if interpreter is None or interpreter.server.poll() is not None:
            interpreter = _PreloadedInterpreter(env)
        _preloaded[key] = interpreter
        idle = [k for k, i in _preloaded.items() if i.running == 0 and k != key]
        for old in idle[: max(0, len(_preloaded) - _MAX_PRELOADED)]:
            _preloaded.pop(old).close()
        return _PreloadedChild(interpreter, args, env, cwd, session)


def skip_unless_installed(name, reason):
    """Skips the calling test (or, at import, test module) when the package `name` is not installed, without
    importing it: the tests run it in the programs they start, and importing Lightning costs each xdist worker
    about 3 s of CPU at collection."""
    if importlib.util.find_spec(name) is None:
        pytest.skip(reason, allow_module_level=True)


def last_line(proc):
    return proc.stdout.strip().splitlines()[-1]


VNPU = [sys.executable, "-m", "vnpu.cli"]


def run(args, env, timeout=300, cwd=None):
    """Runs a command with exactly `env`; returns the CompletedProcess. A command still running after
    `timeout` seconds gets SIGABRT first (Python's faulthandler then prints every thread's stack), and the
    test fails with what it printed."""
    env = dict(env, PYTHONFAULTHANDLER="1")
    child = _preloaded_child(args, env, cwd)
    if child is not None:
        if child.wait(timeout) is None:
            child.send_signal(signal.SIGABRT)
            if child.wait(10) is None:
                child.send_signal(signal.SIGKILL)
                child.wait(None)
            stdout, stderr = child.output()
            raise AssertionError(
                f"{args} did not finish within {timeout} s; its output:\n{stdout[-2000:]}\n"
                f"its stacks and stderr:\n{stderr[-8000:]}"
            )
        return subprocess.CompletedProcess(args, child.returncode, *child.output())
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
    child = _preloaded_child(args, env, session=True)
    if child is not None:
        if child.wait(timeout) is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(None)
            child.output()
            pytest.fail(f"{args} did not finish within {timeout} s")
        return subprocess.CompletedProcess(args, child.returncode, *child.output())
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
