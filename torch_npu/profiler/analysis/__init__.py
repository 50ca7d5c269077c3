"""torch_npu.profiler.analyse: parse profiling data offline, as torch_npu's analyse does for sessions
collected with `tensorboard_trace_handler(..., analyse_flag=False)` (or to parse again).

`profiler_path` is one `..._ascend_pt` directory or a directory holding several; each session's
ASCEND_PROFILER_OUTPUT/ is (re)written from its raw FRAMEWORK data."""

import glob
import os

from torch_npu.profiler import ascend_output
from torch_npu.profiler import session as session_record
from torch_npu.profiler.experimental_config import supported_export_type

__all__ = ["analyse", "find_sessions"]


def find_sessions(profiler_path):
    """The `..._ascend_pt` session directories at or directly under `profiler_path`."""
    if not os.path.isdir(profiler_path):
        raise FileNotFoundError(f"profiler_path does not exist or is not a directory: {profiler_path}")
    if os.path.isfile(os.path.join(profiler_path, session_record.RAW_FILE)):
        return [profiler_path]
    return sorted(
        d
        for d in glob.glob(os.path.join(profiler_path, "*_ascend_pt"))
        if os.path.isfile(os.path.join(d, session_record.RAW_FILE))
    )


def analyse(
    profiler_path: str,
    max_process_number: int = max(1, (os.cpu_count() or 2) // 2),
    export_type: str | list | None = None,
) -> list:
    """Writes ASCEND_PROFILER_OUTPUT/ for every session found; returns their paths."""
    if not isinstance(max_process_number, int) or max_process_number < 1:
        raise ValueError(f"max_process_number must be a positive integer, got {max_process_number!r}")
    if export_type is not None:
        types = export_type if isinstance(export_type, list) else [export_type]
        if not set(types) <= supported_export_type():
            raise ValueError(f"export_type must be among {sorted(supported_export_type())}, got {export_type!r}")
    sessions = find_sessions(profiler_path)
    if not sessions:
        raise FileNotFoundError(
            f"no profiling data to analyse under {profiler_path}: expected "
            f"<worker>_<timestamp>_ascend_pt directories with {session_record.RAW_FILE}"
        )
    return [ascend_output.write_session(path, session_record.load(path), export_type) for path in sessions]
