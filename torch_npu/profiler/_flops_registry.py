"""Which functions the profiler counts the floating-point operations of, and with which formula.

A formula is registered for an operator name with the function it counts, given as "module:attribute"
("torch:mm", "torch_npu:npu_fusion_attention"). torch_npu's own formulas are the defaults (is_default=True); a
formula registered by a program for the same name takes precedence, keeping the default's target when it names
none. Registering a program formula twice logs an error and keeps the later one.
"""

import logging
from collections.abc import Callable

logger = logging.getLogger(__name__)

_default_npu_flop_registry: dict[str, tuple[Callable, str | None]] = {}
_npu_flop_registry: dict[str, tuple[Callable, str | None]] = {}


def register_npu_flop(target: str | None = None, op_name: str | None = None, *, is_default: bool = False):
    """Decorator: `func(*args, **kwargs)` of the target's call returns its FLOPs. op_name defaults to the target's
    attribute, else the function's name."""

    def register(func: Callable) -> Callable:
        if op_name is not None:
            name = op_name
        elif target is not None and ":" in target:
            name = target.split(":", 1)[1]
        else:
            name = func.__name__
        registry = _default_npu_flop_registry if is_default else _npu_flop_registry
        if not is_default and name in registry:
            logger.error("Duplicate external FLOPs registration for %s. The later registration takes precedence.", name)
        registry[name] = (func, target)
        return func

    return register


def get_flop_func(op_name: str) -> Callable | None:
    """The formula counting `op_name`: a program's if it registered one, else torch_npu's, else None."""
    entry = _npu_flop_registry.get(op_name) or _default_npu_flop_registry.get(op_name)
    return entry[0] if entry is not None else None


def get_npu_flop_targets() -> dict[str, str]:
    """op name -> "module:attribute" of every registered formula that names a target (a program's target wins)."""
    targets = {}
    for registry in (_default_npu_flop_registry, _npu_flop_registry):
        targets.update({name: target for name, (_, target) in registry.items() if target is not None})
    return targets
