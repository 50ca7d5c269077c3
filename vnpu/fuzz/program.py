"""Random operator programs: generated from a seed, run on one device, compared bit for bit.

A program is a few input tensors (shape, dtype, layout: contiguous, transposed or strided) and 3-8
steps (fewer when a refused step ends it), each an operator of the catalogue applied to earlier values. It is plain data (JSON), so a
failing program is its own reproducer. Floating inputs are autograd leaves: after the steps, the
gradients of a weighted sum of the results are part of what both devices must agree on.
"""

import dataclasses
import json
import random

import torch

from vnpu.fuzz import catalogue

LAYOUTS = ("contiguous", "transposed", "strided")
GRAD_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@dataclasses.dataclass
class Program:
    seed: int
    inputs: list  # {"shape": [...], "dtype": "float32", "layout": "contiguous", "special": bool}
    steps: list  # {"op": name, "args": [value ids], "params": {...}}

    def to_json(self):
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text):
        return cls(**json.loads(text))

    def source(self):
        """The program as Python a user can run (for reports)."""
        lines = [f"# vnpu fuzz program, seed {self.seed}; inputs: {self.inputs}"]
        for i, step in enumerate(self.steps):
            lines.append(f"step {i}: {step['op']}(values {step['args']}, {step['params']})")
        return "\n".join(lines)


def _base_input(spec, generator):
    shape = list(spec["shape"])
    if spec["layout"] == "strided" and shape:
        shape[-1] *= 2
    if spec["layout"] == "transposed":
        shape = shape[::-1]
    dtype = getattr(torch, spec["dtype"])
    if dtype.is_floating_point:
        t = torch.randn(shape, generator=generator) * 2
        if spec.get("special") and t.numel():
            flat = t.view(-1)
            flat[0], flat[-1] = float("nan"), float("inf")
            if flat.numel() > 2:
                flat[1] = 0.0
        return t.to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    return torch.randint(-5, 6, shape, generator=generator).to(dtype)


def _laid_out(base, spec):
    if spec["layout"] == "transposed":
        return base.permute(list(reversed(range(base.dim()))))
    if spec["layout"] == "strided" and base.dim():
        return base[..., ::2]
    return base


def make_inputs(program, device, requires_grad=False):
    """(values, leaves): the input values on `device` and the autograd leaves behind them."""
    generator = torch.Generator().manual_seed(program.seed)
    values, leaves = [], []
    for spec in program.inputs:
        base = _base_input(spec, generator).to(device)
        if requires_grad and base.dtype in GRAD_DTYPES:
            base.requires_grad_(True)
            leaves.append(base)
            base = base.clone()  # in-place steps then act on a non-leaf, as in a model's forward
        values.append(_laid_out(base, spec))
    return values, leaves


def _outputs(result):
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        return [t for t in result if isinstance(t, torch.Tensor)]
    return []


def _random_inputs(rng):
    rank = rng.choice([0, 1, 1, 2, 2, 2, 3, 3, 4])
    shape = [rng.randint(1, 5) for _ in range(rank)]
    if rank and rng.random() < 0.05:
        shape[rng.randrange(rank)] = 0
    count = rng.randint(1, 3)
    inputs = []
    for _ in range(count):
        same_shape = rng.random() < 0.7
        dtype = rng.choice(catalogue.FLOATS * 6 + catalogue.LOW_PRECISION + catalogue.INTEGERS + ("bool",))
        inputs.append(
            {
                "shape": shape if same_shape else [rng.randint(1, 5) for _ in range(rng.choice([1, 2, 3]))],
                "dtype": dtype,
                "layout": rng.choice(LAYOUTS),
                "special": rng.random() < 0.1,
            }
        )
    return inputs


def generate(seed, ops=None):
    """A program of 3-8 steps: operators are drawn and run on the CPU as they are drawn; most refused
    draws are redrawn, a few are kept (as the program's last step) so error paths are compared too."""
    ops = ops or catalogue.OPERATORS
    rng = random.Random(seed)
    program = Program(seed=seed, inputs=_random_inputs(rng), steps=[])
    values, _ = make_inputs(program, "cpu")
    target = rng.randint(3, 8)
    for _ in range(60):
        if len(program.steps) >= target:
            break
        op = rng.choice(ops)
        args = [rng.randrange(len(values)) for _ in range(op.arity)]
        tensors = [values[a] for a in args]
        try:
            params = op.params(rng, tensors)
        except (IndexError, ValueError, RuntimeError):
            continue
        step = {"op": op.name, "args": args, "params": params}
        try:
            result = op.run(tensors, params)
        except Exception:  # noqa: BLE001 - any refusal: both devices must refuse alike
            if len(program.steps) >= 2 and rng.random() < 0.1:
                program.steps.append(step)
                break
            continue
        program.steps.append(step)
        values.extend(_outputs(result))
    return program


@dataclasses.dataclass
class Outcome:
    values: list  # tensors produced by the steps, on the CPU (detached)
    error: tuple = None  # (step, exception type, message) of the step or backward that raised
    grads: list = None


def execute(program, device, ops_by_name=None, with_grad=True):
    ops_by_name = ops_by_name or catalogue.BY_NAME
    values, leaves = make_inputs(program, device, requires_grad=with_grad)
    produced = []
    error = None
    for i, step in enumerate(program.steps):
        op = ops_by_name[step["op"]]
        try:
            result = op.run([values[a] for a in step["args"]], step["params"])
        except Exception as e:  # noqa: BLE001
            error = (i, type(e).__name__, str(e).split("\n")[0])
            break
        outs = _outputs(result)
        values.extend(outs)
        produced.extend(outs)
    grads = None
    differentiable = [t for t in produced if t.requires_grad]
    if error is None and leaves and differentiable:
        loss = sum((t.float() * (k + 1)).sum() for k, t in enumerate(differentiable))
        try:
            grads = [
                None if g is None else g.detach().cpu() for g in torch.autograd.grad(loss, leaves, allow_unused=True)
            ]
        except Exception as e:  # noqa: BLE001
            error = ("backward", type(e).__name__, str(e).split("\n")[0])
    return Outcome(values=[t.detach().cpu() for t in produced], error=error, grads=grads)


def _bits(t):
    if t.is_floating_point():
        return t.contiguous().view({1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])
    if t.is_complex():
        return torch.view_as_real(t.contiguous())
    return t


def _same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(_bits(a), _bits(b))


def compare(cpu, npu):
    """None when the outcomes agree bit for bit, else (kind, detail)."""
    if (cpu.error is None) != (npu.error is None) or (cpu.error and cpu.error[:2] != npu.error[:2]):
        return "error", f"cpu: {cpu.error}; npu: {npu.error}"
    if len(cpu.values) != len(npu.values):
        return "value", f"{len(cpu.values)} values on cpu, {len(npu.values)} on npu"
    for k, (a, b) in enumerate(zip(cpu.values, npu.values)):
        if not _same(a, b):
            return "value", f"value {k}: cpu {a.dtype}{tuple(a.shape)} vs npu {b.dtype}{tuple(b.shape)}" + _max_diff(
                a, b
            )
    for k, (a, b) in enumerate(zip(cpu.grads or [], npu.grads or [])):
        if (a is None) != (b is None) or (a is not None and not _same(a, b)):
            return "grad", f"gradient of input {k} differs" + ("" if a is None or b is None else _max_diff(a, b))
    return None


def _max_diff(a, b):
    if a.shape != b.shape or not a.is_floating_point() or a.dtype != b.dtype or a.numel() == 0:
        return ""
    return f", max |diff| {(a.double() - b.double()).abs().nan_to_num(nan=float('inf')).max().item():.3g}"


def differential(program, ops_by_name=None):
    """None, or (kind, detail) when npu and the CPU disagree on the program."""
    return compare(execute(program, "cpu", ops_by_name), execute(program, "npu", ops_by_name))
