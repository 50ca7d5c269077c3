"""`vnpu fuzz`: a differential fuzz campaign (npu vs CPU, bit for bit, crashes and hangs caught)."""

import json
import time


def add_parser(sub):
    parser = sub.add_parser("fuzz", help="run random operator programs on npu and the CPU and compare them bit for bit")
    parser.add_argument("--seed", type=int, default=1_000_000, help="first program seed (CI's slice uses 0..)")
    parser.add_argument("--programs", type=int, default=10_000, help="number of programs (default 10,000)")
    parser.add_argument("--minutes", type=float, default=None, help="stop after this long, whatever --programs says")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds a program may run before it is a hang")
    parser.add_argument("--report", default=None, help="write the findings (JSON) to this file")
    parser.set_defaults(func=run)


def run(args):
    from rich.console import Console

    from vnpu.fuzz import campaign

    console = Console(soft_wrap=True)
    deadline = None if args.minutes is None else time.monotonic() + 60 * args.minutes
    seeds = range(args.seed, args.seed + args.programs)
    with console.status("fuzzing") as status:

        def progress(report):
            status.update(f"{report.programs} programs, {len(report.findings)} findings")

        report = campaign.run(seeds, timeout=args.timeout, deadline=deadline, progress=progress)
    for finding in report.findings:
        label = f"expected: {finding.expected}" if finding.expected else "UNEXPECTED"
        console.print(f"seed {finding.seed}: {finding.kind} ({label}): {finding.detail}\n  program: {finding.program}")
    unexpected = report.unexpected()
    console.print(
        f"{report.programs} programs (seeds {args.seed}..{args.seed + report.programs - 1}) in "
        f"{report.seconds:.0f} s: {len(unexpected)} unexpected findings, "
        f"{len(report.findings) - len(unexpected)} expected"
    )
    if args.report:
        with open(args.report, "w") as f:
            json.dump(
                {
                    "programs": report.programs,
                    "seconds": round(report.seconds, 1),
                    "findings": [vars(x) for x in report.findings],
                },
                f,
                indent=1,
            )
    return 1 if unexpected else 0
