"""run_python's snippets and run's `python` commands behave as in a fresh interpreter whether they run in a child of
a preloaded interpreter or in a new one: torch looks unimported until the program imports it, the autoload happens
then, the exit status, output, exceptions and timeouts are subprocess's; environments that torch reads at import
get an interpreter preloaded with them."""

import os
import subprocess
import sys
import textwrap
import time

import pytest
from preloaded_interpreter import can_run
from subprocess_helpers import client_env, run, run_process_group, run_python, snippet_env

# Whether the program ran in a fresh interpreter (this process's child) or a preloaded interpreter's child.
FRESH = f"import os; print('fresh' if os.getppid() == {os.getpid()} else 'preloaded')"


def test_torch_is_imported_by_the_snippet_with_the_autoload_of_a_fresh_interpreter():
    code = """
        import sys
        print("torch" in sys.modules, "torch_npu" in sys.modules)
        import torch
        print("torch_npu" in sys.modules, torch.npu.device_count(), torch.ones(2, device="npu").sum().item())
    """
    outputs = [run_python(textwrap.dedent(code) + FRESH).stdout.split() for _ in range(2)]
    assert outputs[1] == ["False", "False", "True", "8", "2.0", "preloaded"]
    assert outputs[0][:-1] == outputs[1][:-1]


def test_the_snippets_environment_is_read_by_torch_npu_at_import():
    run_python("pass")
    proc = run_python("import torch; print(torch.npu.device_count())", env={"ASCEND_RT_VISIBLE_DEVICES": "1,3,5"})
    assert proc.stdout.strip() == "3"
    first = run_python("import torch_npu, torch; print(torch.npu.device_count())", env={"VNPU_DEVICE_COUNT": "2"})
    assert first.stdout.strip() == "2"


def test_exit_status_output_and_exceptions_are_the_interpreters():
    run_python("pass")
    raised = run_python(FRESH + "; raise ValueError('bad')", check=False)
    assert (raised.returncode, raised.stdout) == (1, "preloaded\n")
    assert (
        raised.stderr == 'Traceback (most recent call last):\n  File "<string>", line 1, in <module>\nValueError: bad\n'
    )
    exited = run_python("import sys, atexit; atexit.register(print, 'exit handler'); sys.exit('gone')", check=False)
    assert (exited.returncode, exited.stdout, exited.stderr) == (1, "exit handler\n", "gone\n")
    assert run_python("import os; os.kill(os.getpid(), 9)", check=False).returncode == -9
    with pytest.raises(subprocess.TimeoutExpired):
        run_python("import time; time.sleep(30)", timeout=1)


def test_variables_torch_reads_at_import_need_their_own_preloaded_interpreter():
    base = snippet_env()
    assert can_run(dict(base, VNPU_DEVICE_COUNT="2", ASCEND_RT_VISIBLE_DEVICES="0", PYTEST_CURRENT_TEST="x"), base)
    for name, value in (("TORCH_LOGS", "+dynamo"), ("PYTHONWARNINGS", "error"), ("OMP_NUM_THREADS", "7")):
        assert not can_run(dict(base, **{name: value}), base), name
    assert not can_run(dict(base, TORCH_DEVICE_BACKEND_AUTOLOAD="0"), base)
    for _ in range(2):
        off = run_python("import torch; print(hasattr(torch, 'npu'))", env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
        assert off.stdout.strip() == "False"
    threads = [run_python(FRESH + "; import torch; print(torch.get_num_threads())", env={"OMP_NUM_THREADS": "2"})]
    threads.append(run_python(FRESH + "; import torch; print(torch.get_num_threads())", env={"OMP_NUM_THREADS": "2"}))
    assert [t.stdout.split() for t in threads] == [["fresh", "2"], ["preloaded", "2"]]


def test_scripts_and_modules_run_as_main_with_their_arguments(tmp_path):
    show = FRESH + "\nimport sys\nprint(__name__, __file__, sys.argv[1:], sys.path[0])\n"
    (tmp_path / "show.py").write_text(show)
    env = client_env(PROBE_MARK=str(tmp_path))  # a startup environment of this test's own: the first run is fresh
    for command in ([str(tmp_path / "show.py")], ["-m", "show"]):
        first, second = (run([sys.executable, *command, "a"], env, cwd=str(tmp_path)).stdout for _ in range(2))
        assert first.split() == ["fresh", "__main__", str(tmp_path / "show.py"), "['a']", str(tmp_path)]
        assert second.split() == ["preloaded", *first.split()[1:]]
        env["PROBE_MARK"] += "/module"


def test_a_snippet_runs_as_main_with_python_c_arguments():
    proc = run_python("import sys; print(__name__, sys.argv, repr(sys.path[0]))")
    assert proc.stdout.strip() == "__main__ ['-c'] ''"
    assert proc.args[:2] == [sys.executable, "-c"]


def test_a_process_group_past_its_timeout_is_killed_with_what_it_started(tmp_path):
    pid_file = tmp_path / "sleeper.pid"
    code = (
        "import subprocess, sys, time\n"
        "sleeper = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(sleeper.pid))\n"
        "time.sleep(120)\n"
    )
    env = dict(snippet_env(), PROBE_MARK=str(tmp_path))
    assert run_process_group([sys.executable, "-c", "print('ok')"], env, 60).stdout == "ok\n"
    with pytest.raises(pytest.fail.Exception, match="did not finish within 3 s"):
        run_process_group([sys.executable, "-c", code], env, 3)
    sleeper = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and os.path.exists(f"/proc/{sleeper}") and "Z" not in status(sleeper):
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{sleeper}") or "Z" in status(sleeper)


def status(pid):
    try:
        return open(f"/proc/{pid}/stat").read().split(")")[1].split()[0]
    except FileNotFoundError:
        return "gone"
