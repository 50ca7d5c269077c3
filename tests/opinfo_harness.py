"""Differential OpInfo harness: every op_db operator with float32 samples runs on cpu and on npu
from the same seed and inputs; outputs and gradients must be bit-identical.

Used by tests/test_opinfo_parity.py (one test per operator) and runnable alone for a summary:

    python tests/opinfo_harness.py [--max-samples 4] [--json out.json]
"""

import argparse
import contextlib
import json
import sys
import time
import warnings

import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._pytree import tree_flatten, tree_map

import torch_npu  # noqa: F401

MAX_SAMPLES = 4

# Their outputs are uninitialised memory: only shape, dtype, strides and device can be compared.
UNINITIALIZED_OUTPUT = {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided"}

# Arguments PyTorch requires on the CPU whatever the device of the other tensors
# (tensor_split: "tensor_indices_or_sections must be on the CPU").
CPU_ONLY_ARGS = {"tensor_split": {1}}


def op_id(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def float32_ops():
    return [op for op in op_db if torch.float32 in op.supported_dtypes("cpu")]


def to_npu(t):
    """The same tensor on npu, with the same storage offset, strides and conj/neg bits."""
    if not isinstance(t, torch.Tensor):
        return t
    if t.layout != torch.strided:
        return t.to("npu")
    plain = t.detach()
    if plain.is_conj():
        plain = plain.conj()
    if plain.is_neg():
        plain = plain._neg_view()
    storage = plain.untyped_storage()
    npu_storage = torch.UntypedStorage(storage.nbytes(), device="npu")
    npu_storage.copy_(storage)
    out = torch.empty(0, dtype=t.dtype, device="npu").set_(
        npu_storage, plain.storage_offset(), plain.size(), plain.stride()
    )
    if t.is_neg():
        out = out._neg_view()
    if t.is_conj():
        out = out.conj()
    if t.requires_grad:
        out.requires_grad_(True)
    return out


def map_devices(value):
    if isinstance(value, torch.device) and value.type == "cpu":
        return torch.device("npu")
    if isinstance(value, str) and value == "cpu":
        return "npu"
    return value


def _bits(t):
    """A tensor whose equality means bit-for-bit equality of t's values."""
    t = t.detach().cpu().resolve_conj().resolve_neg()
    if t.is_complex():
        t = torch.view_as_real(t)
    if t.dtype in (torch.float32, torch.int32):
        return t.contiguous().view(torch.int32)
    if t.dtype in (torch.float64, torch.int64):
        return t.contiguous().view(torch.int64)
    if t.dtype in (torch.float16, torch.bfloat16, torch.int16):
        return t.contiguous().view(torch.int16)
    return t


def compare(npu_out, cpu_out, values=True):
    """None when equal, else the reason."""
    fn, _ = tree_flatten(npu_out)
    fc, _ = tree_flatten(cpu_out)
    if len(fn) != len(fc):
        return "output structure differs"
    for x, y in zip(fn, fc):
        if isinstance(y, torch.Tensor):
            if not isinstance(x, torch.Tensor):
                return f"npu returned {type(x).__name__}, cpu a tensor"
            if y.device.type == "cpu" and x.device.type != "npu":
                return f"output on {x.device}, expected npu"
            if x.shape != y.shape or x.dtype != y.dtype:
                return f"shape/dtype {tuple(x.shape)} {x.dtype} vs {tuple(y.shape)} {y.dtype}"
            if x.layout != torch.strided or y.layout != torch.strided:
                continue
            if not values:
                if x.stride() != y.stride():
                    return f"strides {x.stride()} vs {y.stride()}"
                continue
            if not torch.equal(_bits(x), _bits(y)):
                close = x.is_floating_point() and torch.allclose(
                    x.detach().cpu().double(), y.detach().double(), equal_nan=True
                )
                return "values differ (close)" if close else "values differ"
        elif isinstance(y, (bool, int, float, complex)):
            if not (x == y or (isinstance(y, float) and y != y and x != x)):
                return f"scalar {x} vs {y}"
    return None


def alias_check(cpu_in, cpu_out, npu_in, npu_out):
    """Outputs that share the input's memory on cpu must share it on npu."""
    if not isinstance(cpu_in, torch.Tensor) or cpu_in.layout != torch.strided or not cpu_in.numel():
        return None
    for yc, yn in zip(tree_flatten(cpu_out)[0], tree_flatten(npu_out)[0]):
        if isinstance(yc, torch.Tensor) and isinstance(yn, torch.Tensor) and yc.layout == torch.strided and yc.numel():
            on_cpu = yc.untyped_storage().data_ptr() == cpu_in.untyped_storage().data_ptr()
            on_npu = yn.untyped_storage().data_ptr() == npu_in.untyped_storage().data_ptr()
            if on_cpu != on_npu:
                return f"aliasing differs (cpu shares input memory: {on_cpu}, npu: {on_npu})"
    return None


def gradients(out, inputs):
    outs = [
        t
        for t in tree_flatten(out)[0]
        if isinstance(t, torch.Tensor) and t.requires_grad and (t.is_floating_point() or t.is_complex())
    ]
    ins = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    if not outs or not ins:
        return None
    cotangents = []
    for i, t in enumerate(outs):
        g = torch.Generator().manual_seed(i)
        cotangents.append(torch.randn(t.shape, generator=g, dtype=t.dtype).to(t.device))
    return [g for g in torch.autograd.grad(outs, ins, cotangents, allow_unused=True) if g is not None]


def spread(samples, count):
    """At most `count` of `samples`, evenly spaced over the list: sample generators enumerate their
    parameters in nested loops, so a stride keeps every outer combination where a prefix keeps one."""
    step = max(1, -(-len(samples) // count))
    return samples[::step]


def reseed():
    """torch.manual_seed(0) for the two generators an operator here draws from, the CPU's and the npu's.
    torch.manual_seed also queues the seed for every CUDA, XPU and MTIA device that is not initialised, recording
    the caller's stack each time: on this harness's sample loop that bookkeeping was two thirds of the time."""
    torch.default_generator.manual_seed(0)
    torch.npu.manual_seed_all(0)


def run_op(op, max_samples=MAX_SAMPLES):
    """Returns {"op", "samples", "forward": "pass"|reason, "grad": "pass"|reason|None}."""
    result = {"op": op_id(op), "samples": 0, "forward": "pass", "grad": None}
    supports_grad = op.supports_autograd
    try:
        # One seed for the whole list instead of OpInfo's torch.manual_seed before each sample (see reseed).
        reseed()
        samples = list(op.sample_inputs("cpu", torch.float32, requires_grad=supports_grad, set_seed=False))
        samples = spread(samples, max_samples)
    except Exception as e:  # the sample generator itself fails on this build
        result["forward"] = f"no samples: {type(e).__name__}"
        return result
    cpu_only = CPU_ONLY_ARGS.get(op.name, set())
    compare_values = op.name not in UNINITIALIZED_OUTPUT
    output_func = getattr(op, "output_func", lambda out: out)
    for sample in samples:
        try:
            reseed()
            cpu_out = op(sample.input, *sample.args, **sample.kwargs)
        except Exception:
            continue  # not a valid sample on cpu either
        result["samples"] += 1
        npu_input = tree_map(to_npu, sample.input)
        npu_args = [a if i in cpu_only else tree_map(to_npu, a) for i, a in enumerate(sample.args, start=1)]
        npu_args = [map_devices(a) for a in npu_args]
        npu_kwargs = {k: map_devices(tree_map(to_npu, v)) for k, v in sample.kwargs.items()}
        # Samples without tensors (factories) create on the default device: make that npu.
        has_tensor = any(
            isinstance(t, torch.Tensor) for t in tree_flatten((sample.input, sample.args, sample.kwargs))[0]
        )
        try:
            reseed()
            with contextlib.nullcontext() if has_tensor else torch.device("npu"):
                npu_out = op(npu_input, *npu_args, **npu_kwargs)
        except Exception as e:
            text = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
            result["forward"] = f"error {type(e).__name__}: {text}"
            return result
        why = compare(npu_out, cpu_out, values=compare_values) or alias_check(sample.input, cpu_out, npu_input, npu_out)
        if why:
            result["forward"] = why
            return result
        if supports_grad and result["grad"] in (None, "pass") and compare_values:
            cpu_inputs = tree_flatten((sample.input, sample.args, sample.kwargs))[0]
            try:
                cpu_grads = gradients(output_func(cpu_out), cpu_inputs)
            except Exception:
                cpu_grads = None  # not differentiable on cpu either
            if cpu_grads is not None:
                try:
                    npu_grads = gradients(output_func(npu_out), tree_flatten((npu_input, npu_args, npu_kwargs))[0])
                    why = compare(npu_grads, cpu_grads)
                except Exception as e:
                    why = f"error {type(e).__name__}: {str(e).strip()[:150]}"
                result["grad"] = why or "pass"
    if result["samples"] == 0:
        result["forward"] = "no valid sample"
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-samples", type=int, default=MAX_SAMPLES)
    parser.add_argument("--json")
    parser.add_argument("ops", nargs="*")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    rows = []
    start = time.time()
    for op in float32_ops():
        if args.ops and op_id(op) not in args.ops:
            continue
        rows.append(run_op(op, args.max_samples))
        if rows[-1]["forward"] != "pass" or rows[-1]["grad"] not in (None, "pass"):
            print(rows[-1], flush=True)
    tested = [r for r in rows if r["samples"]]
    fwd = sum(r["forward"] == "pass" for r in tested)
    grads = [r for r in tested if r["grad"] is not None]
    gpass = sum(r["grad"] == "pass" for r in grads)
    print(
        f"{len(tested)} ops with float32 samples: forward {fwd} exact ({100 * fwd / len(tested):.1f}%), "
        f"gradients {gpass}/{len(grads)} exact; {time.time() - start:.0f} s"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
