"""Where the parts of a profiler result directory are, at torch_npu's import path. A result directory
(`<worker>_<pid>_<time>_ascend_pt`) holds the framework side (`FRAMEWORK/`), `profiler_info[_<rank>].json` and
the CANN side `PROF_<n>_<time>_<id>/` with `host/` and one `device_<n>/` per device; ProfilerPathManager finds
each of them ("" or [] when it is absent), in vnpu's output as in a card's."""

import os
import re

from torch_npu.profiler.analysis.prof_common_func._constant import Constant
from torch_npu.utils._error_code import ErrCode, prof_error

__all__ = []

_CANN_DIR = re.compile(r"^PROF_\d+_\d+_[0-9a-zA-Z]+$")
_DEVICE_DIR = re.compile(r"^device_(\d+)$")
_INFO_FILE = re.compile(r"^profiler_info(_\d+)?\.json$")


def _entries(path, want_dir):
    if not path or not os.path.isdir(path):
        return []
    names = sorted(os.listdir(path))
    return [n for n in names if os.path.isdir(os.path.join(path, n)) == want_dir]


def _file_in(folder, name):
    path = os.path.join(folder, name) if folder else ""
    return path if path and os.path.isfile(path) else ""


class ProfilerPathManager:
    @classmethod
    def get_fwk_path(cls, profiler_path: str) -> str:
        path = os.path.join(profiler_path, Constant.FRAMEWORK_DIR)
        return path if os.path.isdir(path) else ""

    @classmethod
    def get_cann_path(cls, profiler_path: str) -> str:
        names = [n for n in _entries(profiler_path, want_dir=True) if _CANN_DIR.match(n)]
        return os.path.join(profiler_path, names[0]) if names else ""

    @classmethod
    def get_info_file_path(cls, profiler_path: str) -> str:
        names = [n for n in _entries(profiler_path, want_dir=False) if _INFO_FILE.match(n)]
        return os.path.join(profiler_path, names[0]) if names else ""

    @classmethod
    def get_host_path(cls, cann_path: str) -> str:
        path = os.path.join(cann_path, "host") if cann_path else ""
        return path if path and os.path.isdir(path) else ""

    @classmethod
    def get_info_path(cls, profiler_path: str) -> str:
        return _file_in(cls.get_host_path(cls.get_cann_path(profiler_path)), "info.json")

    @classmethod
    def get_host_start_log_path(cls, profiler_path: str) -> str:
        return _file_in(cls.get_host_path(cls.get_cann_path(profiler_path)), "host_start.log")

    @classmethod
    def get_device_path(cls, cann_path: str) -> list:
        return [os.path.join(cann_path, n) for n in _entries(cann_path, want_dir=True) if _DEVICE_DIR.match(n)]

    @classmethod
    def get_device_id(cls, cann_path: str) -> list:
        return [int(_DEVICE_DIR.match(n).group(1)) for n in _entries(cann_path, want_dir=True) if _DEVICE_DIR.match(n)]

    @classmethod
    def get_start_info_path(cls, cann_path: str) -> str:
        """host/start_info, else the first device's start_info.<n>."""
        host = _file_in(cls.get_host_path(cann_path), "start_info")
        if host:
            return host
        for device, folder in zip(cls.get_device_id(cann_path), cls.get_device_path(cann_path), strict=True):
            found = _file_in(folder, f"start_info.{device}")
            if found:
                return found
        return ""

    @classmethod
    def _is_profiler_path(cls, path: str) -> bool:
        return bool(cls.get_fwk_path(path) or cls.get_cann_path(path))

    @classmethod
    def get_profiler_path_list(cls, input_path: str) -> list:
        """input_path itself when it is a result directory, else the result directories directly in it."""
        if not os.path.isdir(input_path):
            return []
        if cls._is_profiler_path(input_path):
            return [input_path]
        children = (os.path.join(input_path, n) for n in _entries(input_path, want_dir=True))
        return [path for path in children if cls._is_profiler_path(path)]

    @classmethod
    def get_output_all_file_list_by_type(cls, profiler_path: str, file_type: str) -> list:
        folder = os.path.join(profiler_path, file_type)
        return [os.path.join(folder, n) for n in _entries(folder, want_dir=False)]

    @classmethod
    def get_analyze_all_file(cls, profiler_path: str, analyze_type: str) -> list:
        return cls.get_output_all_file_list_by_type(profiler_path, analyze_type)

    @classmethod
    def get_realpath(cls, path: str) -> str:
        if not path:
            raise RuntimeError("Input path is empty, please check." + prof_error(ErrCode.UNAVAIL))
        path = os.path.expanduser(path)
        if os.path.islink(path):
            raise RuntimeError(f"Invalid input path is a soft chain: {path}" + prof_error(ErrCode.UNAVAIL))
        return os.path.realpath(path)

    @classmethod
    def get_all_subdir(cls, path: str, max_depth: int = 4, _depth: int = 0) -> list:
        """Every directory under path: its children and their descendants down to max_depth levels below them."""
        found = []
        for name in _entries(path, want_dir=True):
            child = os.path.join(path, name)
            found.append(child)
            if _depth < max_depth:
                found.extend(cls.get_all_subdir(child, max_depth, _depth + 1))
        return found
