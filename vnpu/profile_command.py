"""`vnpu profile`: profile a program without changing it, and turn sessions into HTML reports.

    vnpu profile [-o DIR] [--record-shapes] [--profile-memory] [--with-stack] [--no-report] -- python train.py ...
    vnpu profile report DIR [-o FILE]

The first runs the command with torch_npu.profiler on for the whole program (optimizer steps mark the
training steps), writes `<DIR>/<host>_<pid>_<timestamp>_ascend_pt/` and, unless --no-report, a report.html
in each new session. The exit status is the program's. `msprof` (vnpu/msprof.py) is the same with the
seed's msprof options.
"""

import argparse
import json
import os
import subprocess
import sys

from rich.console import Console

__all__ = ["profile_program", "report_sessions", "add_parser"]


def _console():
    return Console(stderr=True, soft_wrap=True)


def profile_program(command, output, options, report=True, prog="vnpu profile"):
    """Runs `command` (a list) profiled into `output`; returns its exit status."""
    from torch_npu.profiler.analysis import find_sessions
    from torch_npu.profiler.program_profile import ENV_OPTIONS, ENV_OUTPUT

    console = _console()
    if not command:
        console.print(f"{prog}: no program to profile; give it after --, e.g. {prog} -- python train.py")
        return 2
    output = os.path.abspath(output)
    try:
        os.makedirs(output, exist_ok=True)
    except OSError as e:
        console.print(f"{prog}: cannot create the output directory {output}: {e.strerror}")
        return 2
    before = set(find_sessions(output))
    switches = ",".join(o for o, on in options.items() if on)
    # PROFILER_SAMPLECONFIG: msprof's configuration of the program it profiles (torch_npu's API stands down)
    sample_config = json.dumps({"output": output, "options": switches})
    env = dict(os.environ, **{ENV_OUTPUT: output, ENV_OPTIONS: switches, "PROFILER_SAMPLECONFIG": sample_config})
    try:
        status = subprocess.run(command, env=env).returncode
    except FileNotFoundError:
        console.print(f"{prog}: cannot run {command[0]}: no such program")
        return 127
    sessions = [s for s in find_sessions(output) if s not in before]
    if not sessions:
        console.print(
            f"{prog}: the program wrote no profiling data (it never imported torch, or exited through "
            "os._exit / a signal)"
        )
        return status or 1
    for session in sessions:
        console.print(f"{prog}: profiling data in {session}")
        if report:
            console.print(f"{prog}: report in {_report(session)}")
    return status


def _report(session, path=None):
    from torch_npu.profiler.report import write_report

    return write_report(session, path)


def report_sessions(directory, output=None, prog="vnpu profile report"):
    """Writes the HTML report of each session at or under `directory`; returns an exit status."""
    from torch_npu.profiler.analysis import find_sessions

    console = _console()
    if not os.path.isdir(directory):
        console.print(f"{prog}: no such directory: {directory}")
        return 2
    sessions = find_sessions(directory)
    if not sessions and os.path.isdir(os.path.join(directory, "ASCEND_PROFILER_OUTPUT")):
        sessions = [directory]  # a session parsed elsewhere (torch_npu's own output)
    if not sessions:
        console.print(f"{prog}: no profiling sessions (<worker>_<timestamp>_ascend_pt directories) in {directory}")
        return 2
    if output and len(sessions) > 1:
        console.print(
            f"{prog}: {len(sessions)} sessions in {directory}; -o names one file, so omit it to write "
            "report.html into each session"
        )
        return 2
    for session in sessions:
        if not os.path.isdir(os.path.join(session, "ASCEND_PROFILER_OUTPUT")):
            from torch_npu.profiler.analysis import analyse

            analyse(session)  # collected with analyse_flag=False: parse it first
        console.print(f"{prog}: report in {_report(session, output)}")
    return 0


def _options(args):
    return {
        "record_shapes": args.record_shapes,
        "profile_memory": args.profile_memory,
        "with_stack": args.with_stack,
        "with_modules": False,
        "with_flops": False,
    }


def run(args):
    argv = list(args.argv)
    if argv[:1] == ["report"]:
        p = argparse.ArgumentParser(prog="vnpu profile report", description="write the HTML report of sessions")
        p.add_argument("directory", help="a ..._ascend_pt session or a directory holding sessions")
        p.add_argument("-o", "--output", help="the HTML file (one session only; default <session>/report.html)")
        ns = p.parse_args(argv[1:])
        return report_sessions(ns.directory, ns.output)
    p = argparse.ArgumentParser(
        prog="vnpu profile", description="profile a program: vnpu profile [options] -- " "python train.py ..."
    )
    p.add_argument("-o", "--output", default="./prof_data", help="directory for the sessions (default ./prof_data)")
    p.add_argument(
        "--record-shapes", action="store_true", help="record input shapes (also enables the Ascend estimate)"
    )
    p.add_argument("--profile-memory", action="store_true", help="record device memory events")
    p.add_argument("--with-stack", action="store_true", help="record the Python call stacks of operators")
    p.add_argument("--no-report", action="store_true", help="do not write report.html")
    if "--" in argv:
        split = argv.index("--")
        own, command = argv[:split], argv[split + 1 :]
    elif argv[:1] and argv[0].startswith("-"):  # options only (--help), no program
        own, command = argv, []
    else:
        own, command = [], argv
    ns = p.parse_args(own)
    return profile_program(command, ns.output, _options(ns), report=not ns.no_report)


def add_parser(sub):
    p = sub.add_parser(
        "profile", help="profile a program (-- python train.py) or write reports (report DIR)", add_help=False
    )
    p.add_argument("argv", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)


if __name__ == "__main__":
    sys.exit(run(argparse.Namespace(argv=sys.argv[1:])))
