"""The FLOPs of the registered functions' calls, as mstx ranges "<flops>-<op name>" in the "mfu_flops" domain.

While installed, each target function of the FLOPs registry (torch.mm, torch_npu.npu_fusion_attention, ...) is
replaced by a wrapper that counts the call's FLOPs with its formula and runs the call inside such a range, so the
range holds the kernels the call launched (msprof-analyze's operator_mfu divides the FLOPs by their device time).
References other modules took to a target before (`from torch import mm`) are replaced too. A call made inside
another counted call is not counted again; a formula that fails is logged and the call runs uncounted. The
profiler installs the wrappers for a recording with `_ExperimentalConfig(record_flops=True)` through the patch
registry, and removes them when it stops.
"""

import functools
import importlib
import logging
import sys
import threading

from torch_npu.npu.mstx import mstx

from ._flops_registry import get_flop_func, get_npu_flop_targets

logger = logging.getLogger(__name__)

_FLOPS_DOMAIN = "mfu_flops"


def _resolve_target(target):
    """(owner, attribute name) of a "module:attr.path" target, or (None, None) with a warning."""
    if ":" not in target:
        logger.warning("Invalid FLOPs target format: %s", target)
        return None, None
    module_name, path = target.split(":", 1)
    try:
        owner = importlib.import_module(module_name)
    except ImportError:
        logger.warning("Cannot import FLOPs target module: %s", module_name)
        return None, None
    *parents, name = path.split(".")
    for parent in parents:
        if not hasattr(owner, parent):
            logger.warning("Cannot resolve FLOPs target: %s", target)
            return None, None
        owner = getattr(owner, parent)
    return owner, name


def _build_target_ops():
    """op name -> (owner, attribute) of every registered target that resolves (torch_npu's formulas loaded)."""
    importlib.import_module("torch_npu.profiler._flops_formulas")
    resolved = {name: _resolve_target(target) for name, target in get_npu_flop_targets().items()}
    return {name: found for name, found in resolved.items() if found[0] is not None}


def _other_references(function, name, owner):
    """(module, name) of the modules other than `owner` whose attribute `name` is `function`."""
    found = []
    for module in list(sys.modules.values()):
        if module is None or module is owner:
            continue
        try:
            if getattr(module, name, None) is function:
                found.append((module, name))
        except Exception:  # noqa: BLE001  (a lazy module may fail on attribute access; it holds no reference)
            continue
    return found


class FlopsHookManager:
    """Installs and removes the counting wrappers (one installation per process)."""

    _local = threading.local()
    _original_funcs = {}
    _patched_targets = {}
    _extra_refs = {}
    _installed = False

    @classmethod
    def install(cls, target_ops=None):
        """Wraps each target (op name -> (owner, attribute); the registry's targets by default)."""
        if cls._installed:
            return
        try:
            for op_name, (owner, name) in (_build_target_ops() if target_ops is None else target_ops).items():
                original = getattr(owner, name, None)
                if original is None:
                    logger.warning("Cannot find FLOPs target %s.%s", owner, name)
                    continue
                wrapper = cls._make_wrapper(op_name, original)
                setattr(owner, name, wrapper)
                cls._original_funcs[op_name] = original
                cls._patched_targets[op_name] = (owner, name)
                cls._extra_refs[op_name] = _other_references(original, name, owner)
                for module, attribute in cls._extra_refs[op_name]:
                    setattr(module, attribute, wrapper)
        except Exception:
            cls._restore()
            raise
        cls._installed = bool(cls._patched_targets)

    @classmethod
    def uninstall(cls):
        cls._restore()

    @classmethod
    def is_installed(cls):
        return cls._installed

    @classmethod
    def _restore(cls):
        for op_name, original in cls._original_funcs.items():
            owner, name = cls._patched_targets[op_name]
            setattr(owner, name, original)
            for module, attribute in cls._extra_refs.get(op_name, ()):
                setattr(module, attribute, original)
        cls._original_funcs.clear()
        cls._patched_targets.clear()
        cls._extra_refs.clear()
        cls._installed = False

    @classmethod
    def _make_wrapper(cls, op_name, original):
        local = cls._local

        @functools.wraps(original)
        def counted(*args, **kwargs):
            if getattr(local, "in_hook", False):  # inside a counted call: its FLOPs are already counted
                return original(*args, **kwargs)
            local.in_hook = True
            range_id = None
            try:
                formula = get_flop_func(op_name)
                if formula is not None:
                    try:
                        flops = formula(*args, **kwargs)
                        if flops is not None and flops >= 0:
                            range_id = mstx.range_start(f"{flops}-{op_name}", domain=_FLOPS_DOMAIN)
                    except Exception:  # noqa: BLE001  (a formula that cannot count leaves the call uncounted)
                        logger.warning("Failed to calculate FLOPs for %s", op_name, exc_info=True)
                return original(*args, **kwargs)
            finally:
                if isinstance(range_id, int) and range_id > 0:
                    mstx.range_end(range_id, domain=_FLOPS_DOMAIN)
                local.in_hook = False

        return counted


def install_flops_hooks():
    """The patch registry's FLOPS_COUNTING: wraps the registered functions; True when it did."""
    FlopsHookManager.install()
    return FlopsHookManager.is_installed()


def remove_flops_hooks():
    installed = FlopsHookManager.is_installed()
    FlopsHookManager.uninstall()
    return installed
