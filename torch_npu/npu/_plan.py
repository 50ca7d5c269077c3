"""What a process run in planning mode (VNPU_PLAN=1) leaves for ``vnpu plan``: at exit it writes
``$VNPU_PLAN_REPORT/plan_<pid>.json`` with the SoC it modelled, each device's allocator statistics, its
allocated peak (the operator, module and program line that made it, the biggest tensors alive then,
named when they are parameters, gradients, buffers or optimizer state), the peaks of every step (a step
ends when an optimizer steps), every operator with its shapes and calls, and the collectives of the hccl
backend (kind, ranks, bytes). Run by ``vnpu plan`` (VNPU_PLAN_OVER_CAPACITY=1), requests beyond the card
get memory anyway and each device records where it would have run out.

Module forwards are followed with PyTorch's global module hooks and steps with the global optimizer
step hook; both are installed only in planning mode."""

import atexit
import json
import os
import threading
import warnings
import weakref

import torch

from torch_npu import _C

_STATS = (
    "allocated_bytes.all.peak",
    "reserved_bytes.all.peak",
    "allocated_bytes.all.current",
    "reserved_bytes.all.current",
    "active_bytes.all.peak",
    "num_alloc_retries",
    "num_ooms",
    "segment.all.peak",
)

_roots = weakref.WeakSet()  # modules whose forward ran outside any other module's
_optimizers = weakref.WeakSet()
_names = weakref.WeakKeyDictionary()  # root -> {id(module): qualified name}
_running = threading.local()


def _module_name(module):
    stack = getattr(_running, "stack", None)
    if stack is None:
        stack = _running.stack = []
    if not stack:
        _roots.add(module)
    root = stack[0] if stack else module
    names = _names.get(root)
    if names is None:
        names = _names[root] = {id(m): name for name, m in root.named_modules()}
    qualified = names.get(id(module), "")
    stack.append(module)
    return f"{qualified} ({type(module).__name__})" if qualified else type(module).__name__


def _enter(module, args):
    _C._plan_enter_module(_module_name(module))


def _exit(module, args, output):
    stack = getattr(_running, "stack", [])
    if stack:
        stack.pop()
    _C._plan_exit_module()


def _stepping(optimizer, args, kwargs):
    _C._plan_enter_module(f"{type(optimizer).__name__}.step")


def _stepped(optimizer, args, kwargs):
    _optimizers.add(optimizer)
    _C._plan_exit_module()
    _C._plan_end_step()


def _storage_ptr(tensor):
    if hasattr(tensor, "to_local"):  # a DTensor: this rank's shard
        tensor = tensor.to_local()
    if not isinstance(tensor, torch.Tensor) or tensor.device.type != "npu":
        return None
    return tensor.untyped_storage().data_ptr()


def _tensor_names():
    """Address of each npu storage -> the names of the parameters, gradients, buffers and optimizer
    states that live in it."""
    names = {}

    def add(tensor, name):
        ptr = _storage_ptr(tensor)
        if ptr:
            names.setdefault(ptr, []).append(name)

    param_names = {}
    for root in list(_roots):
        for name, p in root.named_parameters():
            param_names[id(p)] = name
            add(p, name)
            if p.grad is not None:
                add(p.grad, f"{name}.grad")
        for name, b in root.named_buffers():
            add(b, name)
    for optimizer in list(_optimizers):
        for p, state in optimizer.state.items():
            for key, value in state.items():
                if isinstance(value, torch.Tensor) and value.dim() > 0:
                    add(value, f"{param_names.get(id(p), type(optimizer).__name__)}.{key}")
    return names


def _memory():
    memory = {}
    names = _tensor_names()
    for device, record in _C._plan_memory().items():
        for block in record["biggest"]:
            known = names.get(block["ptr"], [])
            same = known and _C._plan_block_serial(block["ptr"]) == block["serial"]
            block["name"] = ", ".join(known) if same else ""
            del block["ptr"], block["serial"]
        memory[device] = record
    return memory


def _devices(memory):
    used = []
    for index in range(torch.npu.device_count()):
        stats = torch.npu.memory_stats(index)
        if stats.get("reserved_bytes.all.peak", 0) > 0:
            peak = memory.get(index, {})
            used.append(
                {
                    "device": index,
                    **{key: stats.get(key, 0) for key in _STATS},
                    "peak_operator": peak.get("operator", ""),
                    "peak_module": peak.get("module", ""),
                    "peak_site": peak.get("site", ""),
                    "biggest_at_peak": peak.get("biggest", []),
                    "steps": peak.get("steps", []),
                    "over_capacity": peak.get("over_capacity"),
                }
            )
    return used


def write(directory):
    report = {
        "pid": os.getpid(),
        "rank": int(os.environ.get("RANK", "0")),
        "soc": _C._soc_profile(),
        "devices": _devices(_memory()),
        "operators": [list(row) for row in _C._plan_ledger()],
        "collectives": [
            {key: c[key] for key in ("kind", "group", "rank", "size", "bytes", "dtype")} for c in _C._collective_stop()
        ],
    }
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"plan_{os.getpid()}.json"), "w") as f:
        json.dump(report, f)


def install():
    """Called at import in planning mode: follow module forwards and optimizer steps (for the memory
    labels and per-step peaks); with VNPU_PLAN_REPORT set, record collectives and write the report at exit."""
    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    # Compiled code computes values; planned programs run torch.compile'd functions op by op instead
    # (PyTorch's own eager stance), so every operator plans. Module hooks are planning mode's own, so
    # torch.compile's note about global hooks says nothing to the user here.
    torch.compiler.set_stance("force_eager")
    warnings.filterwarnings("ignore", message=r"Using `torch.compile\(module\)` when there are global hooks")
    register_module_forward_pre_hook(_enter)
    register_module_forward_hook(_exit, always_call=True)
    register_optimizer_step_pre_hook(_stepping)
    register_optimizer_step_post_hook(_stepped)
    directory = os.environ.get("VNPU_PLAN_REPORT")
    if not directory:
        return
    _C._collective_start()
    atexit.register(write, directory)
