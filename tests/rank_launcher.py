"""Starts the ranks of one multi-process test from one interpreter (test_distributed.launch runs it).

    python rank_launcher.py SPEC.json

SPEC holds the worker script, its arguments and, per rank, the environment variables that differ
from this process's own (RANK, LOCAL_RANK) and the file its output goes to. torch and torch_npu are
imported once here; each rank is then a forked child that takes its environment and runs the worker
as `__main__`, as `python WORKER ARGS` would. A rank costs a fork instead of an interpreter that
imports torch again (seconds of CPU per rank on two cores shared by the whole suite). The device is
never initialised here, so each child initialises its own as a fresh process does (torch_npu refuses
a device initialised before a fork). Prints each rank's exit status, as JSON, when all have ended;
whoever started this process ends the ranks by ending its process group."""

import json
import os
import sys

import torch  # noqa: F401  (imported once, before the forks: the point of this launcher)
from preloaded_interpreter import run_main

import torch_npu  # noqa: F401


def run_rank(worker, args, env, output):
    """In the forked child: becomes `python worker args` with `env` added; returns its exit status (the
    worker's SystemExit ends this process as it ends that command). The interpreter then ends normally (its
    exit handlers run, as after the worker's last line)."""
    os.environ.update(env)
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout.reconfigure(line_buffering=True)
    return run_main([worker, *args])


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    children = []
    sys.stdout.flush()
    for rank in spec["ranks"]:
        pid = os.fork()
        if pid == 0:
            return run_rank(spec["worker"], spec["args"], rank["env"], rank["output"])  # the rank's interpreter ends
        children.append(pid)
    codes = {}
    while len(codes) < len(children):  # reaped as they end: a rank that died is gone, not a zombie, for the others
        pid, status = os.wait()
        codes[pid] = os.waitstatus_to_exitcode(status)
    print(json.dumps([codes[pid] for pid in children]), flush=True)


if __name__ == "__main__":
    sys.exit(main())
