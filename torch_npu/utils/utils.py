"""torch_npu's log lines for its Python tools: ``YYYY-mm-dd HH:MM:SS(pid)-[LEVEL] message`` on stdout."""

import os
import time

from torch_npu.utils._warnings import should_print_warning as _should_print_warning  # noqa: F401  (torch_npu's name)

__all__ = []


def _print_log(level: str, message: str):
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    print(f"{stamp}({os.getpid()})-[{level}] {message}")


def _print_info_log(message: str):
    _print_log("INFO", message)


def _print_warn_log(message: str):
    _print_log("WARNING", message)


def _print_error_log(message: str):
    _print_log("ERROR", message)
