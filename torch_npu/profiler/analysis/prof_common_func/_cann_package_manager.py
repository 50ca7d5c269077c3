"""What the installed CANN toolkit's profiling exporter can write.

torch_npu asks `msprof --help`: a `--type` option means it exports a database, and a default export of
"text(which will also export the database)" means a text export writes one alongside. The check functions do
exactly that. On vnpu the exporter is vnpu's own, whose answers are known without asking: it writes the database
(ascend_pytorch_profiler_*.db) when export_type asks for "db", and a text export writes no database alongside. So
CannPackageManager starts from those answers; set an attribute to None and it asks msprof, as torch_npu does.
"""

import os
import shutil
import stat
import subprocess

__all__ = []

_COMMAND_SUCCESS = 0


def _safe_executable(path):
    """An existing msprof must belong to root or to this user and not be writable by others."""
    if not os.path.exists(path):
        return True
    info = os.stat(path)
    return info.st_uid in (0, os.getuid()) and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def check_msprof_help_output(search_text: str) -> bool:
    """True when `msprof --help` succeeds and prints search_text; False without msprof or on any failure."""
    try:
        msprof_path = shutil.which("msprof")
        if not msprof_path or not _safe_executable(msprof_path):
            return False
        completed = subprocess.run([msprof_path, "--help"], capture_output=True, shell=False, text=True)
        if completed.returncode != _COMMAND_SUCCESS:
            return False
        return search_text in completed.stdout
    except Exception:  # noqa: BLE001 - a probe of an external tool: any failure means "not supported"
        return False


def check_cann_package_support_export_db() -> bool:
    return check_msprof_help_output("--type")


def check_cann_package_support_default_export_db() -> bool:
    return check_msprof_help_output("text(which will also export the database)")


class CannPackageManager:
    SUPPORT_EXPORT_DB = True
    SUPPORT_DEFAULT_EXPORT_DB = False

    @classmethod
    def is_support_export_db(cls) -> bool:
        if cls.SUPPORT_EXPORT_DB is None:
            cls.SUPPORT_EXPORT_DB = check_cann_package_support_export_db()
        return cls.SUPPORT_EXPORT_DB

    @classmethod
    def is_support_default_export_db(cls) -> bool:
        if cls.SUPPORT_DEFAULT_EXPORT_DB is None:
            cls.SUPPORT_DEFAULT_EXPORT_DB = check_cann_package_support_default_export_db()
        return cls.SUPPORT_DEFAULT_EXPORT_DB
