"""Shrinking a failing program to the smallest one that still fails the same way.

Steps are dropped one at a time, last first (the steps that consumed their results take the dropped
step's first argument instead, or are dropped with it), then the
inputs are simplified (contiguous layout, no special values) while the failure keeps its kind. Value,
error and gradient divergences are re-checked in this process; crashes and hangs in a child process.
"""

import dataclasses
import json
import subprocess
import sys

from vnpu.fuzz.program import Program


def _outputs_per_step(program, by_name):
    from vnpu.fuzz.program import _outputs, make_inputs

    values, _ = make_inputs(program, "cpu")
    counts = []
    for step in program.steps:
        try:
            outs = _outputs(by_name[step["op"]].run([values[a] for a in step["args"]], step["params"]))
        except Exception:  # noqa: BLE001 - the program stops at its first refused step
            counts.append(0)
            break
        values.extend(outs)
        counts.append(len(outs))
    return counts + [0] * (len(program.steps) - len(counts))


def without_step(program, index, by_name, bypass=False):
    """The program without step `index`: the steps that used its results use its first argument instead
    (bypass), or go too."""
    counts = _outputs_per_step(program, by_name)
    old_to_new, removed = {}, set()
    next_id = len(program.inputs)
    for i in range(len(program.inputs)):
        old_to_new[i] = i
    old_id = len(program.inputs)
    steps = []
    for i, step in enumerate(program.steps):
        ids = range(old_id, old_id + counts[i])
        old_id += counts[i]
        if i == index and bypass and step["args"]:
            for k in ids:
                old_to_new[k] = old_to_new[step["args"][0]]
            continue
        if i == index or any(a in removed for a in step["args"]):
            removed.update(ids)
            continue
        steps.append({**step, "args": [old_to_new[a] for a in step["args"]]})
        for k in ids:
            old_to_new[k] = next_id
            next_id += 1
    return dataclasses.replace(program, steps=steps)


def _failure_kind(program, by_name, kind, timeout):
    if kind in ("crash", "hang"):
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "vnpu.fuzz.minimise", "--check"],
                input=program.to_json(),
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            return "hang"
        return "crash" if proc.returncode != 0 else None
    from vnpu.fuzz.program import differential

    found = differential(program, by_name)
    return found[0] if found else None


def minimise(program, kind, by_name, timeout=60.0):
    """The smallest program found that still fails with `kind`."""
    changed = True
    while changed:
        changed = False
        for index in reversed(range(len(program.steps))):
            for bypass in (True, False):
                candidate = without_step(program, index, by_name, bypass)
                if candidate.steps and _failure_kind(candidate, by_name, kind, timeout) == kind:
                    program, changed = candidate, True
                    break
            if changed:
                break
    for i, spec in enumerate(program.inputs):
        for simpler in ({"layout": "contiguous"}, {"special": False}):
            if all(spec.get(k) == v for k, v in simpler.items()):
                continue
            inputs = list(program.inputs)
            inputs[i] = {**spec, **simpler}
            candidate = dataclasses.replace(program, inputs=inputs)
            if _failure_kind(candidate, by_name, kind, timeout) == kind:
                program, spec = candidate, inputs[i]
    return program


def minimise_finding(finding, timeout=60.0):
    from vnpu.fuzz.campaign import operator_set

    if not finding.program:
        return finding
    _, by_name = operator_set()
    smallest = minimise(Program.from_json(finding.program), finding.kind, by_name, timeout)
    return dataclasses.replace(finding, program=smallest.to_json())


def _check():
    """Child process: run one program (stdin) on both devices; a crash or hang shows in the exit."""
    import warnings

    warnings.filterwarnings("ignore")
    import torch_npu  # noqa: F401
    from vnpu.fuzz.campaign import operator_set
    from vnpu.fuzz.program import differential

    _, by_name = operator_set()
    found = differential(Program.from_json(sys.stdin.read()), by_name)
    print(json.dumps(found))


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        _check()
