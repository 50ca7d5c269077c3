"""`msprof`: seed 000's Ascend profiling commands on vnpu.

    msprof --application="python train.py" --output=./prof_data     # collect
    msprof --analyze=./prof_data --format=html                        # report

Collecting runs the application with torch_npu.profiler on for the whole program (vnpu profile);
analysing writes report.html into each session found. Exit status: the application's, or 0 / 2.
"""

import argparse
import shlex
import sys

from vnpu.profile_command import profile_program, report_sessions


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="msprof", description="Profile a program on vnpu, or report on profiling data.")
    p.add_argument("--application", help='the program to profile, quoted: --application="python train.py"')
    p.add_argument("--output", default="./", help="where profiling data goes (default: the current directory)")
    p.add_argument("--analyze", metavar="DIR", help="write reports for the profiling data in DIR")
    p.add_argument("--format", default="html", help="report format: html (the only one)")
    p.add_argument(
        "--record-shapes",
        choices=["on", "off"],
        default="on",
        help="record operator shapes (default on; needed for the Ascend estimate)",
    )
    p.add_argument(
        "--sys-hardware-mem", choices=["on", "off"], default="on", help="record device memory events (default on)"
    )
    args = p.parse_args(argv)
    if bool(args.application) == bool(args.analyze):
        p.error('give either --application="python train.py" (collect) or --analyze=DIR (report)')
    if args.analyze:
        if args.format != "html":
            p.error(f"--format {args.format} is not supported; use --format=html")
        return report_sessions(args.analyze, prog="msprof")
    try:
        command = shlex.split(args.application)
    except ValueError as e:
        p.error(f"--application cannot be parsed: {e}")
    options = {
        "record_shapes": args.record_shapes == "on",
        "profile_memory": args.sys_hardware_mem == "on",
        "with_stack": False,
        "with_modules": False,
        "with_flops": False,
    }
    return profile_program(command, args.output, options, report=False, prog="msprof")


if __name__ == "__main__":
    sys.exit(main())
