"""Super kernels: on Ascend a captured NPU graph's kernels can be fused into one ("super kernel") launch, within
the scopes super_kernel_scope_begin / _end mark, tuned by NPUGraph.super_kernel_optimize's options. vnpu replays
operators one by one (the results are the same); it keeps the scopes' nesting and checks the options as
torch_npu checks them, so a program that passes a wrong one learns it here rather than on the card."""

from torch_npu.utils._error_code import ErrCode, graph_error

__all__ = ["super_kernel_scope_begin", "super_kernel_scope_end"]

_INT, _TEXT, _NAMES, _TABLE = "an int", "a str", "a list of kernel names", "a dict"

# the options each side takes, and what their values are
OPTIMIZE_OPTIONS = {
    "preload_code": _INT,
    "split_mode": _INT,
    "stream_fusion": _INT,
    "constant_codegen": _INT,
    "auto_op_parallel": _INT,
    "early_start": _INT,
    "opt_extend": _TEXT,
    "ubuf_lock_ignore_kernel": _NAMES,
    "dcci_disable_on_kernel": _NAMES,
    "dcci_before_kernel_start": _NAMES,
    "dcci_after_kernel_end": _NAMES,
    "aggressive_opt_strategies": _TABLE,
}
DEBUG_OPTIONS = {
    "debug_sync_all": _INT,
    "debug_op_exec_trace": _INT,
    "debug_cross_core_sync_check": _INT,
    "debug_per_op_max_core_num": _INT,
    "debug_extend": _TEXT,
    "debug_dcci_disable_on_kernel": _NAMES,
    "debug_dcci_before_kernel_start": _NAMES,
    "dcci_disable_on_kernel": _NAMES,
}

_scopes = []


def _is(value, kind):
    if kind == _INT:
        return isinstance(value, int)
    if kind == _TEXT:
        return isinstance(value, str)
    if kind == _TABLE:
        return isinstance(value, dict)
    return isinstance(value, (list, tuple)) and all(isinstance(name, str) for name in value)


def checked_options(argument, options, known):
    """`options` (None or a dict of known names to values of their kind), or a RuntimeError naming what is wrong."""
    if options is None:
        return None
    if not isinstance(options, dict):
        raise RuntimeError(
            f"super_kernel_optimize: {argument} must be a dict or None, got {type(options).__name__}"
            + graph_error(ErrCode.TYPE)
        )
    for name, value in options.items():
        if name not in known:
            raise RuntimeError(
                f"super_kernel_optimize: unknown {argument} key {name!r}; known: {', '.join(known)}"
                + graph_error(ErrCode.PARAM)
            )
        if not _is(value, known[name]):
            raise RuntimeError(
                f"super_kernel_optimize: {argument}[{name!r}] must be {known[name]}, got {type(value).__name__}"
                + graph_error(ErrCode.TYPE)
            )
    return dict(options)


def super_kernel_scope_begin(scope_name: str | None = None) -> None:
    """Mark where a super-kernel fusion scope starts (a hint for Ascend's graph compiler); a name, if given, must
    not be blank."""
    if scope_name is not None and not str(scope_name).strip():
        raise RuntimeError(
            f"super_kernel_scope_begin: scope_name must not be empty or blank, got {scope_name!r}"
            + graph_error(ErrCode.PARAM)
        )
    _scopes.append(scope_name)


def super_kernel_scope_end(scope_name: str | None = None) -> None:
    if not _scopes:
        raise RuntimeError("super_kernel_scope_end without super_kernel_scope_begin" + graph_error(ErrCode.PARAM))
    opened = _scopes.pop()
    if scope_name is not None and opened is not None and scope_name != opened:
        raise RuntimeError(
            f"super_kernel_scope_end({scope_name!r}) closes scope {opened!r}" + graph_error(ErrCode.PARAM)
        )
