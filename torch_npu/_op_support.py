"""Operator-support profiles: which ATen operators a torch_npu release runs on the NPU, and so which ones
real hardware would hand to torch_npu's CPU fallback.

A profile is derived at run time from the official torch-npu wheel (`vnpu ops sync`): the wheel lists
its NPU kernels in ``torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml`` (``supported``,
``autograd``, ``symint`` and ``quant`` entries) and ``npu_native_functions.yaml``. Profiles live in the
user's cache (``$VNPU_CACHE_DIR``, else ``$XDG_CACHE_HOME/vnpu``, else ``~/.cache/vnpu``); the last one
synced is active, else the profile of the matching release that vnpu ships (``op_support_profiles/``).
``VNPU_OPS_PROFILE`` overrides: a torch_npu version, a profile file, or ``none``.

With a profile active, an operator that has a CPU kernel, no NPU kernel in the profile and is not
decomposed before reaching the backend (CompositeImplicitAutograd) prints torch_npu's fallback warning
once, is counted with the Python line that issued it, and with TORCH_NPU_FALLBACK_CPU_DISABLE=1 raises
torch_npu's error instead. Membership is decided once per operator in C++ (aten/CpuFallback.h).
"""

import json
import os
import platform
import subprocess
import sys
import tempfile
import zipfile

__all__ = []

_WHEEL_LISTS = ("supported", "autograd", "symint", "quant")
_CODEGEN_YAML = "torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml"
_OP_PLUGIN_DOCS = "torch_npu/_op_plugin_docs.py"  # op-plugin's documented custom operators
_BASE_YAML = "torch_npu/csrc/aten/npu_native_functions.yaml"
_OFF = ("none", "off", "0", "")

# The warning as torch_npu's log line shows it (its message and, from c10's warning handler, the function).
WARNING = (
    "CAUTION: The operator '{op}' is not currently supported on the NPU backend and will fall back to "
    "run on the CPU. This may have performance implications. (function npu_cpu_fallback)"
)
REFUSAL = (
    "The operator '{op}' would execute its main computation on CPU through dispatcher backend fallback "
    "because no kernel is registered for the NPU PrivateUse1 backend, but CPU fallback is disabled by "
    "TORCH_NPU_FALLBACK_CPU_DISABLE=1."
)


def cache_dir():
    if os.environ.get("VNPU_CACHE_DIR"):
        return os.environ["VNPU_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "vnpu")


def _profiles_dir():
    return os.path.join(cache_dir(), "profiles")


def profile_path(version):
    return os.path.join(_profiles_dir(), f"torch_npu-{version}.json")


def _entry_name(entry):
    """'add.Tensor' from a yaml entry: a plain name, or a dict whose func is a name or a whole schema."""
    func = entry.get("func") if isinstance(entry, dict) else entry
    if not isinstance(func, str):
        return None
    return func.split("(", 1)[0].strip() or None


def parse_wheel_lists(codegen_yaml, base_yaml=None):
    """{list name: sorted operator names} from the wheel's yaml texts."""
    import yaml

    lists = {}
    codegen = yaml.safe_load(codegen_yaml) or {}
    for key in _WHEEL_LISTS:
        lists[key] = sorted({n for n in map(_entry_name, codegen.get(key) or []) if n})
    if base_yaml:
        base = yaml.safe_load(base_yaml) or {}
        lists["base"] = sorted({n for n in map(_entry_name, base.get("supported") or []) if n})
    return lists


def custom_operators_from_docs(text):
    """The custom operators (torch_npu.npu_* and friends) op-plugin documents in the wheel's _op_plugin_docs.py."""
    import re

    return sorted(set(re.findall(r'_add_torch_npu_docstr\(\s*"([A-Za-z0-9_]+)"', text)))


def native_functions_text():
    """torch's own native_functions.yaml (packaged with torchgen)."""
    import torchgen

    path = os.path.join(os.path.dirname(torchgen.__file__), "packaged", "ATen", "native", "native_functions.yaml")
    with open(path) as f:
        return f.read()


def structured_delegates():
    """{operator: its structured delegate} from torch's own native_functions.yaml ('gelu' -> 'gelu.out'): a
    backend that implements the delegate runs the functional and in-place variants through it."""
    import re

    text = native_functions_text()
    pattern = r"^- func: ([\w.]+)\(.*?\n(?:(?!- func:).*\n)*?\s+structured_delegate: ([\w.]+)"
    return dict(re.findall(pattern, text, flags=re.MULTILINE))


def with_structured_variants(kernels):
    """The kernels plus the operators whose structured delegate is one of them."""
    found = set(kernels)
    return sorted(found | {op for op, delegate in structured_delegates().items() if delegate in found})


def profile_from_wheel(wheel_path):
    """A profile dict from a torch-npu wheel file."""
    with zipfile.ZipFile(wheel_path) as wheel:
        names = set(wheel.namelist())
        if _CODEGEN_YAML not in names:
            raise ValueError(
                f"{os.path.basename(wheel_path)} has no {_CODEGEN_YAML}: not a torch-npu wheel " "with operator lists"
            )
        codegen = wheel.read(_CODEGEN_YAML).decode()
        base = wheel.read(_BASE_YAML).decode() if _BASE_YAML in names else None
        docs = wheel.read(_OP_PLUGIN_DOCS).decode() if _OP_PLUGIN_DOCS in names else ""
    version = os.path.basename(wheel_path).split("-")[1]
    lists = parse_wheel_lists(codegen, base)
    kernels = with_structured_variants(set().union(*lists.values()))
    return {
        "torch_npu": version,
        "wheel": os.path.basename(wheel_path),
        "npu_kernels": kernels,
        "lists": lists,
        "custom_operators": custom_operators_from_docs(docs),
    }


def default_requirement():
    """torch-npu's release series matching the installed torch (torch 2.13.x -> torch-npu==2.13.*)."""
    import torch

    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return f"torch-npu=={major}.{minor}.*"


def download_wheel(requirement, dest):
    """Fetch one torch-npu wheel (no dependencies) with pip into dest; returns its path."""
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    errors = []
    for tag in ("manylinux_2_28", "manylinux2014"):
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            requirement,
            "--no-deps",
            "--only-binary=:all:",
            "--platform",
            f"{tag}_{machine}",
            "--python-version",
            python,
            "--implementation",
            "cp",
            "-d",
            dest,
            "--quiet",
            "--disable-pip-version-check",
        ]
        done = subprocess.run(cmd, capture_output=True, text=True)
        wheels = [f for f in os.listdir(dest) if f.endswith(".whl")]
        if done.returncode == 0 and wheels:
            return os.path.join(dest, wheels[0])
        errors.append(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"pip exited {done.returncode}")
    raise RuntimeError(f"could not download {requirement} with pip: {errors[-1]}")


def sync(version=None):
    """Build and store the profile of torch-npu `version` (default: the series matching torch); make it
    the active one. Returns the stored profile."""
    requirement = f"torch-npu=={version}" if version else default_requirement()
    with tempfile.TemporaryDirectory() as tmp:
        profile = profile_from_wheel(download_wheel(requirement, tmp))
    os.makedirs(_profiles_dir(), exist_ok=True)
    with open(profile_path(profile["torch_npu"]), "w") as f:
        json.dump(profile, f)
    with open(os.path.join(cache_dir(), "active"), "w") as f:
        f.write(profile["torch_npu"])
    return profile


def _read(path):
    try:
        with open(path) as f:
            profile = json.load(f)
    except (OSError, ValueError) as err:
        raise RuntimeError(f"vnpu: cannot read the operator-support profile {path}: {err}") from err
    if not isinstance(profile, dict) or not isinstance(profile.get("npu_kernels"), list):
        raise RuntimeError(f"vnpu: {path} is not an operator-support profile (no npu_kernels list)")
    return profile


def active_profile():
    """The active profile dict, or None (none synced, or VNPU_OPS_PROFILE=none)."""
    spec = os.environ.get("VNPU_OPS_PROFILE")
    if spec is not None:
        if spec.strip().lower() in _OFF:
            return None
        if spec.endswith(".json") or os.sep in spec:
            return _read(spec)
        if not os.path.exists(profile_path(spec)):
            raise RuntimeError(
                f"vnpu: VNPU_OPS_PROFILE={spec!r}: no profile for torch_npu {spec} "
                f"(run `vnpu ops sync --torch-npu {spec}`)"
            )
        return _read(profile_path(spec))
    try:
        with open(os.path.join(cache_dir(), "active")) as f:
            version = f.read().strip()
    except OSError:
        return shipped_profile()
    return _read(profile_path(version)) if os.path.exists(profile_path(version)) else shipped_profile()


def shipped_profile():
    """The profile of the torch_npu release matching this torch (shipped in torch_npu/op_support_profiles),
    so fallback warnings and TORCH_NPU_FALLBACK_CPU_DISABLE work without `vnpu ops sync`; None if vnpu
    ships none for this torch."""
    import torch

    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "op_support_profiles")
    prefix = f"torch_npu-{major}.{minor}."
    candidates = sorted(f for f in os.listdir(folder) if f.startswith(prefix)) if os.path.isdir(folder) else []
    return _read(os.path.join(folder, candidates[-1])) if candidates else None


# Composite operators that torch_npu runs with an NPU kernel of its own, but that vnpu computes exactly as the
# CPU does, through the CPU's implementation operators. The card never reaches those operators, so they are NPU
# work wherever the profile gives the composite an NPU kernel (scaled_dot_product_attention picks the CPU's
# flash kernel on vnpu: _fused_sdp_choice decides as on the CPU, for bit-identical results).
IMPLEMENTED_THROUGH = {
    "scaled_dot_product_attention": (
        "_scaled_dot_product_flash_attention_for_cpu",
        "_scaled_dot_product_flash_attention_for_cpu_backward",
    ),
}


def npu_work(profile):
    """The operators that run as NPU work under `profile`: its NPU kernels, and the operators vnpu implements
    one of them through (IMPLEMENTED_THROUGH)."""
    kernels = set(profile["npu_kernels"])
    for composite, implementation in IMPLEMENTED_THROUGH.items():
        if composite in kernels:
            kernels.update(implementation)
    return kernels


def classify(qualified, npu_kernels, kernels):
    """How real hardware runs aten operator `qualified` ('aten::fmax.out'): 'npu' (an NPU kernel),
    'decomposed' (CompositeImplicitAutograd: runs as other operators), 'composite' (a device-generic
    kernel), 'cpu_fallback', or 'none' (no kernel for any device). `kernels`: _op_selection.aten_kernels()."""
    from torch_npu import _op_selection as selection

    short = qualified[len("aten::") :]
    if short in npu_kernels:
        return "npu"
    bits = kernels.get(short, 0)
    if bits & selection.IMPLICIT:
        return "decomposed"
    if bits & selection.CPU:
        return "cpu_fallback"
    if bits & (selection.EXPLICIT | selection.EXPLICIT_NON_FUNCTIONAL):
        return "composite"
    return "none"


def fallback_operators(profile, kernels=None):
    """aten operators ('fmax.out') the profile's torch_npu would run through the CPU fallback (`kernels`:
    _op_selection.aten_kernels(), when the caller has it)."""
    from torch_npu import _op_selection as selection

    npu_kernels = npu_work(profile)
    kernels = selection.aten_kernels() if kernels is None else kernels
    return sorted(short for short in kernels if classify("aten::" + short, npu_kernels, kernels) == "cpu_fallback")


def fallback_reports(profile):
    """{operator: the name torch_npu's fallback warns under} for the profile's fallback operators. A structured
    operator without an NPU kernel runs on the card through its CompositeExplicitAutogradNonFunctional kernel,
    which calls its structured delegate: when that delegate falls back, the warning names the delegate
    ('fmax' -> 'fmax.out')."""
    from torch_npu import _op_selection as selection

    kernels = selection.aten_kernels()
    falling = set(fallback_operators(profile, kernels))
    delegates = structured_delegates()
    reports = {}
    for op in falling:
        delegate = delegates.get(op)
        through_delegate = delegate in falling and kernels.get(op, 0) & selection.EXPLICIT_NON_FUNCTIONAL
        reports[op] = delegate if through_delegate else op
    return reports


class FallbackLedger:
    """What the fallback handler saw: calls per operator and per issuing Python line."""

    def __init__(self, profile, refuse):
        self.profile = profile
        self.refuse = refuse
        self.calls = {}
        self.sites = {}

    def __call__(self, op):
        from torch_npu.utils._warnings import npu_warn

        if self.refuse:
            from torch_npu.utils._error_code import ErrCode, ops_error

            return REFUSAL.format(op=op) + ops_error(ErrCode.NOT_SUPPORT)
        first = op not in self.calls
        self.calls[op] = self.calls.get(op, 0) + 1
        site = _calling_line()
        self.sites.setdefault(op, {})
        self.sites[op][site] = self.sites[op].get(site, 0) + 1
        if first:
            npu_warn(WARNING.format(op=op), stacklevel=3)  # the user's line, past this handler
        return ""


_PACKAGE_DIRS = None


def _calling_line():
    """'file:line' of the innermost Python frame outside torch and torch_npu."""
    global _PACKAGE_DIRS
    if _PACKAGE_DIRS is None:
        import torch

        import torch_npu

        _PACKAGE_DIRS = tuple(os.path.dirname(m.__file__) + os.sep for m in (torch, torch_npu))
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_PACKAGE_DIRS) and not filename.startswith("<frozen"):
            return f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


_ledger = None


def ledger():
    """The active FallbackLedger, or None without a profile."""
    return _ledger


def activate_from_environment(c_module):
    """Install the active profile's fallback set in C++ (before operators are registered or run)."""
    global _ledger
    profile = active_profile()
    if profile is None:
        return None
    refuse = os.environ.get("TORCH_NPU_FALLBACK_CPU_DISABLE") == "1"  # read once, as torch_npu does
    _ledger = FallbackLedger(profile, refuse)
    c_module._set_cpu_fallback_operators(fallback_reports(profile), _ledger)
    return _ledger
