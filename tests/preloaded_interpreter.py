"""An interpreter with torch already imported that runs commands of the tests in forked children.

    python preloaded_interpreter.py SOCKET

A fresh interpreter spends about two seconds of CPU importing torch before a program's first line, and
the suite starts hundreds of them (snippets of `run_python`, the vnpu command line, client scripts). Their
subject is what torch_npu does with the environment it finds at import, and torch_npu is never imported
here: each child takes the command's environment and working directory, torch looks unimported to it until
its first `import torch` (the device backend autoload runs then, as at the end of a fresh import), and it
runs as `python -c CODE`, `python -m MODULE` or `python SCRIPT` would.

What a child cannot have fresh is what torch itself read while this process imported it. The client
therefore uses a preloaded interpreter started with the same values of every variable torch may read at
import (all but STARTUP_SAFE); one such interpreter serves every command with those values.

Protocol, one connection per command: the client sends one JSON line {argv, env, cwd, stdout, stderr,
session} (argv after the interpreter's path; stdout and stderr are files the child writes; session: the
child starts a session and process group of its own); this process answers the child's pid, then, when the
child has ended, its exit status as subprocess reports it (negative: the signal). This process ends when
its standard input closes (the client's pipe: the pytest worker ended).
"""

import builtins
import importlib.abc
import importlib.util
import json
import os
import runpy
import select
import signal
import socket
import sys
import traceback
import types

# The environment variables whose values torch does not read while it is imported (checked: `import torch`
# imports neither Dynamo's nor Inductor's configuration, which read theirs when first imported): torch_npu's,
# CANN's and vnpu's own settings, the ranks' rendezvous, the compiler settings and pytest's (the test running).
STARTUP_SAFE = (
    "PYTEST_",
    "VNPU_",
    "ASCEND_",
    "TORCH_NPU_",
    "TORCH_TRANSFER_TO_NPU",
    "PYTORCH_NPU_",
    "PYTORCH_NO_NPU",
    "HCCL_",
    "ACL_",
    "NPU_",
    "TASK_QUEUE_ENABLE",
    "INF_NAN_MODE",
    "TORCHINDUCTOR_",
    "TORCHDYNAMO_",
    "MASTER_",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
)
# Set in this process only: the child runs the autoload itself, when the snippet first imports torch.
AUTOLOAD = "TORCH_DEVICE_BACKEND_AUTOLOAD"


def startup_key(env):
    """What of `env` torch may read while it is imported; None when a preloaded interpreter cannot serve it (the
    autoload switch is read then, and the preloaded interpreter imports torch with it off)."""
    if AUTOLOAD in env:
        return None
    return tuple(sorted((k, v) for k, v in env.items() if not k.startswith(STARTUP_SAFE)))


def can_run(env, preloaded_env):
    """Whether a child of an interpreter preloaded in `preloaded_env` runs in `env` as a fresh interpreter would."""
    key = startup_key(env)
    return key is not None and key == startup_key(preloaded_env)


class _TorchAtFirstImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Makes torch look not yet imported until the snippet's first `import torch` (its own, or torch_npu's),
    which then finishes as it does in a fresh interpreter: the device backend autoload (when
    TORCH_DEVICE_BACKEND_AUTOLOAD allows it at that moment: torch_npu switches it off around its own import of
    torch), then the parsing of TORCH_LOGS that follows it (backends register their log names first)."""

    def __init__(self):
        self.modules = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "torch"}
        self.spec = self.modules["torch"].__spec__
        for name in self.modules:
            del sys.modules[name]
        sys.meta_path.insert(0, self)

    def find_spec(self, name, path=None, target=None):
        # Also asked without importing (importlib.util.find_spec: "is torch installed?"): this finder stays
        # until torch is imported.
        return importlib.util.spec_from_loader(name, self) if name == "torch" else None

    def create_module(self, spec):
        sys.meta_path.remove(self)
        sys.modules.update(self.modules)
        return self.modules["torch"]

    def exec_module(self, torch):
        torch.__spec__ = self.spec  # the import system gave it this loader's
        if torch._is_device_backend_autoload_enabled():
            torch._import_device_backends()
        torch._logging._init_logs()


def runs_as_command(argv):
    """Whether a child can run `python ARGV` (after the interpreter's path): `-c CODE`, `-m MODULE` or a script,
    each with its arguments, and no interpreter options."""
    return bool(argv) and (argv[0] in ("-c", "-m") and len(argv) > 1 or not argv[0].startswith("-"))


def run_main(argv):
    """Runs `python ARGV` as the interpreter would in this process; returns the exit status."""
    if argv[0] == "-m":  # runpy sets sys.argv[0] to the module's file, as `python -m` does
        sys.argv = ["-m", *argv[2:]]
        sys.path[0] = os.getcwd()
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        return 0
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    if argv[0] == "-c":
        sys.argv = ["-c", *argv[2:]]
        sys.path[0] = ""
        source, filename = argv[1], "<string>"
    else:
        sys.argv = list(argv)
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
        main.__file__ = filename = argv[0]
        with open(filename, "rb") as script:
            source = script.read()
    try:
        exec(compile(source, filename, "exec"), main.__dict__)
    except Exception as error:  # noqa: BLE001  (reported as the interpreter reports it, without this file's frames)
        traceback.print_exception(type(error), error, error.__traceback__.tb_next)
        return 1
    return 0


def _become_command(request, listener, connection, wakeup):
    """In the forked child: the state `python ARGV` would have, then the command. Returns the exit status for
    the interpreter's normal end (exit handlers run, buffers are flushed)."""
    if request["session"]:  # a process group of its own, as Popen(start_new_session=True) starts
        os.setsid()
    listener.close()
    connection.close()
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.close(wakeup)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, fd)
        os.close(out)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    _TorchAtFirstImport()
    return run_main(request["argv"])


def serve(path):
    """Accepts snippets until standard input closes; returns the exit status when this process is a child."""
    import torch  # noqa: F401  (the point of this process: imported once, before the forks)

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    wakeup, wakeup_write = os.pipe()
    os.set_blocking(wakeup_write, False)
    signal.set_wakeup_fd(wakeup_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    print("ready", flush=True)
    waiting = {}  # child pid -> the connection its status goes to
    while True:
        ready, _, _ = select.select([listener, wakeup, sys.stdin], [], [])
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1):
            return None
        if wakeup in ready:
            os.read(wakeup, 512)
        if listener in ready:
            connection, _ = listener.accept()
            request = json.loads(connection.makefile().readline())
            pid = os.fork()
            if pid == 0:
                os.close(wakeup_write)
                return _become_command(request, listener, connection, wakeup)
            connection.sendall(f"{pid}\n".encode())
            waiting[pid] = connection
        while waiting:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            connection = waiting.pop(pid)
            connection.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
            connection.close()


if __name__ == "__main__":
    status = serve(sys.argv[1])
    if status is not None:
        sys.exit(status)
