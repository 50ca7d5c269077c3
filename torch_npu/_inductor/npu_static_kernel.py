"""torch_npu's static-kernel compiler (torch_npu._inductor.npu_static_kernel).

On a card, a run under ``StaticKernelCompiler()`` records the signature of every operator it executes
(torch_npu._C._aclop_start_dump), then CANN's ``op_compiler`` builds static kernels for those signatures into
a ``.run`` package, which is installed and selected (torch_npu.npu._aclnn_reselect_static_kernel). On vnpu
the recording is real (one JSON file per operator signature, see torch_npu/npu/_op_info_dump.py); without
``op_compiler`` on PATH no package is built, and the compiler says so and leaves the files for inspection.
"""

import datetime
import os
import shutil
import subprocess
from pathlib import Path

import torch_npu
from torch_npu._inductor.config import log

__all__ = []

_uninstall_path = None


def safe_resolve_output_dir(build_dir):
    """A new `<timestamp>_<pid>_kernel_aot_optimization_build_outputs` folder in `build_dir` (the current
    directory by default). A path with a NUL byte, a ".." part or a symbolic link on the way raises
    ValueError; a folder that cannot be made raises RuntimeError."""
    base = Path.cwd().resolve()
    if build_dir is None:
        parent = base
    else:
        if "\x00" in build_dir:
            raise ValueError("build_dir contains null byte")
        candidate = Path(build_dir)
        if ".." in candidate.parts:
            raise ValueError("build_dir must not contain '..'")
        parent = candidate if candidate.is_absolute() else base / candidate
        walked = Path(parent.anchor)
        for part in parent.parts[1:]:
            walked = walked / part
            if walked.is_symlink():
                raise ValueError(f"symlink detected in path: {walked}")
        parent = parent.resolve(strict=False)
    stamp = f"{datetime.datetime.now().strftime('%Y%m%d%H%M%S%f')}_{os.getpid()}"
    result_root = parent / f"{stamp}_kernel_aot_optimization_build_outputs"
    try:
        result_root.mkdir(exist_ok=True)
    except OSError as e:
        raise RuntimeError(f"failed to create output directory {result_root}: {e}") from e
    return result_root


class AclopDumpContext:
    """Records operator information into `save_path` while the block runs."""

    def __init__(self, save_path):
        self.save_path = save_path

    def __enter__(self):
        torch_npu._C._aclop_start_dump(self.save_path)
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        torch_npu._C._aclop_stop_dump()


def save_uninstall_info(filename):
    """Remembers the uninstall script of the static kernel package `filename` under $ASCEND_HOME_PATH."""
    global _uninstall_path
    home = os.environ.get("ASCEND_HOME_PATH")
    pattern = f"*/opp/static_kernel/ai_core/{filename}/uninstall.sh"
    found = next(Path(home).parent.glob(pattern), None) if home else None
    _uninstall_path = str(found) if found is not None else None
    if found is None:
        log.debug("can not find uninstall path, pattern: %s", pattern)


class StaticKernelCompiler:
    """Runs the block recording its operators, then builds and installs their static kernels."""

    def __init__(self, build_dir=None):
        self.result_root = safe_resolve_output_dir(build_dir)
        log.debug("StaticKernelCompiler initialized. Build directory: %s", self.result_root)

    def __enter__(self):
        log.info("Starting operator dump...")
        torch_npu._C._aclop_start_dump(str(self.result_root))
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        torch_npu._C._aclop_stop_dump()
        log.info("Stopping operator dump.")
        if exc_type is not None:
            log.error("An exception occurred during model execution: %s", exc_val)
            log.info("Skipping static kernel compilation due to the error.")
            return
        debug_dirs = [d for d in self.result_root.iterdir() if d.is_dir() and d.name.endswith("_debug")]
        if not debug_dirs:
            log.error("Can not find json of ops, skipping op_compiler.")
            return
        debug_dir = max(debug_dirs, key=lambda d: d.stat().st_mtime)
        if not any(debug_dir.glob("*.json")):
            log.error("No json files in %s, skipping op_compiler.", debug_dir)
            return
        if shutil.which("op_compiler") is None:
            log.warning(
                "CANN's op_compiler is not installed: no static kernels are built (vnpu runs PyTorch's CPU "
                "kernels); the operator information is in %s",
                debug_dir,
            )
            return
        self._build_and_install(debug_dir)

    def _build_and_install(self, debug_dir):
        cmd = ["op_compiler", "-p", str(debug_dir), "-v", torch_npu.npu.get_device_name(), "-l", "info"]
        cmd += ["-j", "4", "-o", str(self.result_root)]
        try:
            res = subprocess.run(cmd, check=True, capture_output=True, text=True)
            log.debug("op_compiler execution successful, msg: %s", res.stdout)
        except subprocess.CalledProcessError as e:
            log.error("op_compiler execution failed, msg: %s", e.stderr)
            return
        for package in self.result_root.glob("*.run"):
            try:
                res = subprocess.run([str(package)], check=True, capture_output=True, text=True)
            except subprocess.CalledProcessError as e:
                log.error(" %s install failed, msg: %s", package.name, e.stderr)
                continue
            log.info("%s install successful, msg: %s", package.name, res.stdout)
            save_uninstall_info(package.name[: -len(".run")])
            torch_npu.npu._aclnn_reselect_static_kernel()


def uninstall_static_kernel():
    """Runs the uninstall script of the last installed static kernel package, if any."""
    global _uninstall_path
    if not _uninstall_path:
        log.debug("uninstall_path is none, skip uninstall static kernel")
        return
    try:
        res = subprocess.run([_uninstall_path], check=True, capture_output=True, text=True)
        log.debug("%s uninstall success, msg: \n%s", _uninstall_path, res.stdout)
    except subprocess.CalledProcessError as e:
        log.error("%s uninstall failed, msg: \n%s", _uninstall_path, e.stderr)
    finally:
        _uninstall_path = None
