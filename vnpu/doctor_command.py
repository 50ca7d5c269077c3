"""``vnpu doctor``: checks an installation and says what to fix.

Each check reports ok, warn or fail with what it found and, when it is not ok, the fix:

* torch: the 2.13 CPU build vnpu is built for (a CUDA build or another version breaks the extension);
* compiler: a C++ compiler for torch.compile's inductor (it compiles npu graphs to C++);
* autoload: the ``torch.backends`` entry point that makes ``import torch`` load torch_npu;
* runtime: a fresh interpreter imports torch_npu, counts the devices and computes on npu:0; errors and
  warnings it prints (an environment variable with an invalid value, ...) are shown here;
* operator-support profile: the torch_npu release whose CPU-fallback list is active;
* npu-smi registry: /dev/shm is writable; entries of killed processes are cleaned.

Exit status 1 when a check fails.
"""

import importlib.metadata
import os
import shutil
import subprocess
import sys

from rich.console import Console
from rich.table import Table

OK, WARN, FAIL = "ok", "warn", "fail"
_STYLE = {OK: "green", WARN: "yellow", FAIL: "red"}

_RUNTIME_PROBE = """
import warnings
warnings.simplefilter("always")
import torch, torch_npu
n = torch.npu.device_count()
t = torch.ones(4, device="npu")
assert (t + t).sum().item() == 8
props = torch.npu.get_device_properties(0)
print(f"{n} x {props.name}, {props.total_memory // 2**30} GiB each")
"""


def check_torch():
    import torch

    wanted = next(
        (r.split("==")[1] for r in importlib.metadata.requires("vnpu") or [] if r.startswith("torch==")), "2.13.*"
    )
    version = torch.__version__.split("+")[0]
    if not version.startswith(wanted.rstrip("*")):
        return FAIL, f"torch {torch.__version__}; vnpu needs torch=={wanted}", f"pip install 'torch=={wanted}'"
    if torch.version.cuda is not None or torch.version.hip is not None:
        return (
            WARN,
            f"torch {torch.__version__} is a GPU build",
            f"vnpu needs no GPU: pip install 'torch=={wanted}' --index-url https://download.pytorch.org/whl/cpu",
        )
    return OK, f"torch {torch.__version__} (CPU build)", ""


def check_compiler():
    name = os.environ.get("CXX", "g++")
    path = shutil.which(name)
    if path is None:
        return WARN, f"no C++ compiler ({name}) on PATH", "install g++: torch.compile's inductor compiles C++"
    try:
        first = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError) as err:
        return WARN, f"{path} does not run: {err}", "install a working g++"
    return OK, first, ""


def check_autoload():
    points = [e for e in importlib.metadata.entry_points(group="torch.backends") if e.name == "torch_npu"]
    if not points:
        return FAIL, "no torch.backends entry point for torch_npu", "pip install --no-build-isolation -e . (vnpu)"
    if os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD") == "0":
        return WARN, "TORCH_DEVICE_BACKEND_AUTOLOAD=0: import torch does not load torch_npu", "unset it"
    return OK, f"{points[0].value} runs on import torch", ""


def check_runtime():
    proc = subprocess.run([sys.executable, "-c", _RUNTIME_PROBE], capture_output=True, text=True, timeout=300)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    if proc.returncode != 0:
        return FAIL, lines[-1] if lines else f"exit status {proc.returncode}", "fix what the error names"
    # "file:line: UserWarning: text" -> "UserWarning: text"
    warnings = [line.split(": ", 1)[-1].strip() for line in lines if "Warning: " in line]
    if warnings:
        return WARN, proc.stdout.strip() + "; " + " | ".join(warnings), "fix what the warning names"
    return OK, proc.stdout.strip(), ""


def check_op_profile():
    from torch_npu import _op_support

    try:
        profile = _op_support.active_profile()
    except RuntimeError as err:
        return FAIL, str(err), "unset VNPU_OPS_PROFILE or run `vnpu ops sync`"
    if profile is None:
        return WARN, "no operator-support profile: CPU-fallback warnings are off", "unset VNPU_OPS_PROFILE=none"
    return OK, f"torch_npu {profile.get('torch_npu')}: {len(profile['npu_kernels'])} NPU kernels", ""


def check_registry():
    from vnpu import npu_smi

    if not os.access(npu_smi.REGISTRY_DIR, os.W_OK):
        return WARN, f"{npu_smi.REGISTRY_DIR} is not writable: npu-smi sees no process", "mount /dev/shm"
    live = npu_smi.read_registry()
    return OK, f"{len(live)} vnpu process(es) hold npu memory", ""


CHECKS = (
    ("torch", check_torch),
    ("compiler", check_compiler),
    ("autoload", check_autoload),
    ("runtime", check_runtime),
    ("operator-support profile", check_op_profile),
    ("npu-smi registry", check_registry),
)


def results(checks=CHECKS):
    out = []
    for name, check in checks:
        try:
            status, detail, fix = check()
        except Exception as err:  # noqa: BLE001 - a check that breaks is itself a finding
            status, detail, fix = FAIL, f"{type(err).__name__}: {err}", "report this"
        out.append((name, status, detail, fix))
    return out


def run(args):
    found = results()
    table = Table(title="vnpu doctor")
    for column in ("check", "status", "found", "fix"):
        table.add_column(column, overflow="fold")
    for name, status, detail, fix in found:
        table.add_row(name, f"[{_STYLE[status]}]{status}[/]", detail, fix)
    Console(width=args.width).print(table)
    return 1 if any(status == FAIL for _, status, _, _ in found) else 0


def add_parser(sub):
    parser = sub.add_parser("doctor", help="check the installation and say what to fix")
    parser.add_argument("--width", type=int, default=None, help="table width (default: the terminal's)")
    parser.set_defaults(func=run)
