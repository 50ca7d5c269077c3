"""torch_npu's PathManager: the checks its profiler and tools apply to user paths (no symbolic links,
bounded lengths, the caller's own files) and the safe create/remove helpers they use."""

import os
import re
import shutil

from torch_npu.utils import collect_env
from torch_npu.utils._error_code import ErrCode, pta_error

__all__ = ["PathManager"]

# Letters, digits, CJK, whitespace and . / _ - ~ : the characters torch_npu accepts in a user path.
_PATH_CHARACTERS = re.compile(r"[.\/_\-\s~0-9a-zA-Z\u4e00-\u9fa5]+")


class PathManager:
    MAX_PATH_LENGTH = 4096
    MAX_FILE_NAME_LENGTH = 255
    DATA_FILE_AUTHORITY = 0o640
    DATA_DIR_AUTHORITY = 0o750

    @classmethod
    def _check_input_path(cls, path: str) -> None:
        if len(path) > cls.MAX_PATH_LENGTH or any(len(part) > cls.MAX_FILE_NAME_LENGTH for part in path.split("/")):
            raise RuntimeError("Length of input path exceeds the limit." + pta_error(ErrCode.PARAM))
        if os.path.islink(path):
            raise RuntimeError(f"Invalid input path is a soft chain: {path}" + pta_error(ErrCode.UNAVAIL))
        if not _PATH_CHARACTERS.fullmatch(path):
            raise RuntimeError(f"Invalid input path: {path}" + pta_error(ErrCode.PARAM))

    @classmethod
    def check_input_directory_path(cls, path: str) -> None:
        """A valid directory path (it need not exist), not a file."""
        cls._check_input_path(path)
        if os.path.isfile(path):
            raise RuntimeError(f"Invalid input path is a file path: {path}" + pta_error(ErrCode.PARAM))

    @classmethod
    def check_input_file_path(cls, path: str) -> None:
        """A valid file path (it need not exist), not a directory."""
        cls._check_input_path(path)
        if os.path.isdir(path):
            raise RuntimeError(f"Invalid input path is a directory path: {path}" + pta_error(ErrCode.PARAM))

    @classmethod
    def check_path_owner_consistent(cls, path: str) -> None:
        collect_env.check_path_owner_consistent(path)

    @classmethod
    def check_directory_path_readable(cls, path: str) -> None:
        collect_env.check_directory_path_readable(path)

    @classmethod
    def check_directory_path_writeable(cls, path: str) -> None:
        cls.check_path_owner_consistent(path)
        if os.path.islink(path):
            raise RuntimeError(f"Invalid path is a soft chain: {path}" + pta_error(ErrCode.UNAVAIL))
        if not os.access(path, os.W_OK):
            raise RuntimeError(f"The path permission check failed: {path}" + pta_error(ErrCode.PERMISSION))

    @classmethod
    def make_dir_safety(cls, path: str) -> None:
        if os.path.islink(path):
            raise RuntimeError(f"Failed to make directory: {path}" + pta_error(ErrCode.UNAVAIL))
        try:
            os.makedirs(path, mode=cls.DATA_DIR_AUTHORITY, exist_ok=True)
        except OSError as err:
            raise RuntimeError(f"Failed to make directory: {path}" + pta_error(ErrCode.SYSCALL)) from err

    @classmethod
    def create_file_safety(cls, path: str) -> None:
        if os.path.islink(path):
            raise RuntimeError(f"Failed to create file: {path}" + pta_error(ErrCode.UNAVAIL))
        if os.path.exists(path):
            return
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, cls.DATA_FILE_AUTHORITY))
        except OSError as err:
            raise RuntimeError(f"Failed to create file: {path}" + pta_error(ErrCode.SYSCALL)) from err

    @classmethod
    def remove_path_safety(cls, path: str) -> None:
        _remove(path, shutil.rmtree, "Failed to remove path")

    @classmethod
    def remove_file_safety(cls, path: str) -> None:
        _remove(path, os.remove, "Failed to remove file")


def _remove(path, remover, failure):
    """Remove `path` with `remover` unless it is a symbolic link; a path already gone is fine."""
    if os.path.islink(path):
        raise RuntimeError(f"{failure}: {path}" + pta_error(ErrCode.UNAVAIL))
    try:
        remover(path)
    except FileNotFoundError:
        return
    except OSError as err:
        raise RuntimeError(f"{failure}: {path}" + pta_error(ErrCode.SYSCALL)) from err
