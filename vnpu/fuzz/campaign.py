"""A fuzz campaign: programs run in a worker process, so a crash or a hang is caught and reported with
the program that caused it, and the campaign goes on with a fresh worker.

The worker (``python -m vnpu.fuzz.campaign --worker``) reads seeds on stdin and answers one JSON line
per seed ({"seed", "status": "ok" | "diverged", "kind", "detail"}), having announced each seed
before running it; a worker that dies or stays silent longer than the time limit leaves the seed it
announced last as the crash or hang.
"""

import dataclasses
import json
import os
import selectors
import subprocess
import sys
import time

from vnpu.fuzz.expected_failures import expected_reason


@dataclasses.dataclass
class Finding:
    seed: int
    kind: str  # "value", "error", "grad", "crash", "hang"
    detail: str
    program: str = ""  # the program's JSON (minimised where possible)
    expected: str = ""  # the reason, when listed in expected_failures


@dataclasses.dataclass
class Report:
    programs: int = 0
    findings: list = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def unexpected(self):
        return [f for f in self.findings if not f.expected]


def operator_set():
    """The catalogue's operators, or those VNPU_FUZZ_OPERATORS="module:attribute" names (a list of Op: the
    fuzzer's own tests plant defects with it)."""
    spec = os.environ.get("VNPU_FUZZ_OPERATORS")
    if spec:
        import importlib

        module, attribute = spec.split(":")
        ops = list(getattr(importlib.import_module(module), attribute))
    else:
        from vnpu.fuzz import catalogue

        ops = catalogue.OPERATORS
    return ops, {op.name: op for op in ops}


def worker():
    import warnings

    warnings.filterwarnings("ignore")
    import torch_npu  # noqa: F401
    from vnpu.fuzz.program import differential, generate

    ops, by_name = operator_set()
    for line in sys.stdin:
        seed = int(line)
        program = generate(seed, ops)
        print(json.dumps({"seed": seed, "status": "start", "program": program.to_json()}), flush=True)
        found = differential(program, by_name)
        answer = {"seed": seed, "status": "ok"}
        if found:
            answer = {
                "seed": seed,
                "status": "diverged",
                "kind": found[0],
                "detail": found[1],
                "program": program.to_json(),
            }
        print(json.dumps(answer), flush=True)


class _Worker:
    def __init__(self):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vnpu.fuzz.campaign", "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.process.stdout, selectors.EVENT_READ)
        self.pending = b""  # bytes read past the last complete line

    def send(self, seed):
        self.process.stdin.write(f"{seed}\n".encode())
        self.process.stdin.flush()

    def read(self, timeout):
        """The next answer, or "dead" / "silent" (raw reads: a buffered reader would hide complete lines
        from the selector)."""
        end = time.monotonic() + timeout
        while b"\n" not in self.pending:
            remaining = end - time.monotonic()
            if remaining <= 0 or not self.selector.select(remaining):
                return "silent"
            chunk = os.read(self.process.stdout.fileno(), 1 << 16)
            if not chunk:
                return "dead"
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)

    def stop(self):
        self.process.kill()
        self.process.wait(timeout=30)


def run(seeds, *, timeout=60.0, minimise=True, deadline=None, progress=None):
    """Run the programs of `seeds` (an iterable); returns a Report. `deadline` (time.monotonic())
    stops the campaign early; a divergent program is minimised to the smallest one that still diverges."""
    from vnpu.fuzz.minimise import minimise_finding

    report = Report()
    start = time.monotonic()
    worker_process = None
    for seed in seeds:
        if deadline is not None and time.monotonic() > deadline:
            break
        if worker_process is None:
            worker_process = _Worker()
        worker_process.send(seed)
        finding = None
        program = ""
        for _ in range(2):  # "start", then the answer
            answer = worker_process.read(timeout)
            if isinstance(answer, dict) and answer["status"] == "start":
                program = answer["program"]
                continue
            if answer in ("dead", "silent"):
                kind = "crash" if answer == "dead" else "hang"
                try:  # its output closed first: wait for the exit status
                    code = worker_process.process.wait(timeout=30) if kind == "crash" else None
                except subprocess.TimeoutExpired:
                    code = None
                worker_process.stop()
                worker_process = None
                finding = Finding(
                    seed,
                    kind,
                    f"worker {'exited with ' + str(code) if kind == 'crash' else 'silent'}"
                    f"{'' if kind == 'crash' else f' for {timeout:.0f} s'} on this program",
                    program,
                )
                break
            if answer["status"] == "diverged":
                finding = Finding(seed, answer["kind"], answer["detail"], answer["program"])
        report.programs += 1
        if finding is not None:
            if minimise:
                finding = minimise_finding(finding, timeout=timeout)
            finding.expected = expected_reason(finding)
            report.findings.append(finding)
        if progress is not None:
            progress(report)
    if worker_process is not None:
        worker_process.stop()
    report.seconds = time.monotonic() - start
    return report


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker()
