"""Reading and writing the profiler's JSON files at torch_npu's import path: files are created with owner-only
permissions (0o640, as torch_npu's result files) and read back as JSON."""

import json
import os

from torch_npu.utils._path_manager import PathManager

__all__ = []


class FileManager:
    @classmethod
    def create_json_file_by_path(cls, output_path: str, data, indent=None) -> None:
        """Writes `data` as JSON to output_path (replacing it), creating the file with torch_npu's permissions."""
        if not data:
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        with os.fdopen(os.open(output_path, flags, PathManager.DATA_FILE_AUTHORITY), "w", encoding="utf-8") as file:
            json.dump(data, file, indent=indent, ensure_ascii=False)

    @classmethod
    def read_json_file(cls, file_path: str):
        """The JSON content of file_path; {} when there is no such file."""
        if not os.path.isfile(file_path):
            return {}
        with open(file_path, encoding="utf-8") as file:
            return json.load(file)
