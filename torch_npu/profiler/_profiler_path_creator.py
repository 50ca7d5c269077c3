"""ProfPathCreator: the one place that decides where a profiling session's `..._ascend_pt` directory goes.

As in torch_npu it is a process-wide singleton. `init(worker_name, dir_name)` is called by
tensorboard_trace_handler when the handler is made, or by a custom on_trace_ready handler's factory (the
pattern torch_npu's documentation shows for moving results to shared storage); each recorded session then
gets `create_prof_dir()`: `<dir>/<worker>_<timestamp>_ascend_pt`, dir defaulting to
$ASCEND_WORK_PATH/profiling_data or the working directory, worker to `<hostname>_<pid>`.
`get_prof_dir()` is the last session's directory.
"""

import os
import shutil

from torch_npu.profiler import ascend_output
from torch_npu.profiler.analysis.prof_common_func._constant import print_warn_msg
from torch_npu.utils._path_manager import PathManager

__all__ = []

_MAX_WORKER_NAME_LENGTH = 226
_PROFILING_WORK_PATH = "profiling_data"
_EXPORT_ONLY_DIR = "export_only_prof_dir"


class ProfPathCreator:
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
            cls._instance._prof_path = None
            cls._instance._worker_name = None
            cls._instance._dir_path = None
            cls._instance._export_only_mode = False
            cls._instance.is_prof_inited = False
        return cls._instance

    def init(self, worker_name: str = None, dir_name: str = None, export_only_mode: bool = False) -> None:
        """Where the next sessions go; an invalid worker_name or dir_name warns and is reset to the default.
        export_only_mode: a session recorded without on_trace_ready, whose directory is temporary."""
        self._export_only_mode = export_only_mode
        if worker_name is None or (isinstance(worker_name, str) and 0 < len(worker_name) < _MAX_WORKER_NAME_LENGTH):
            self._worker_name = worker_name
        else:
            print_warn_msg("Invalid parameter worker_name, reset it to default.")
            self._worker_name = None
        if isinstance(dir_name, str) and dir_name:
            PathManager.check_input_directory_path(os.path.realpath(dir_name))
            self._dir_path = dir_name
        else:
            if dir_name is not None:
                print_warn_msg("Invalid parameter dir_name, reset it to default.")
            self._dir_path = None

    def _base_dir(self):
        if self._dir_path:
            return self._dir_path
        work_path = os.environ.get("ASCEND_WORK_PATH")
        if work_path:
            self._export_only_mode = False
            return os.path.join(os.path.abspath(work_path), _PROFILING_WORK_PATH)
        if self._export_only_mode:
            return os.path.join(os.getcwd(), _EXPORT_ONLY_DIR)
        return os.getcwd()

    def create_prof_dir(self) -> str:
        """Makes the next session's directory and returns it."""
        base = self._base_dir()
        if os.path.exists(base):
            PathManager.check_directory_path_writeable(base)
        path = ascend_output.worker_dir(base, self._worker_name)
        PathManager.make_dir_safety(path)
        self._prof_path = path
        self.is_prof_inited = True
        return path

    def get_prof_dir(self) -> str:
        return self._prof_path

    def delete_prof_dir(self):
        try:
            shutil.rmtree(self._prof_path)
        except (OSError, TypeError):
            print_warn_msg("Remove temporary profiling data saving path failed.")

    def delete_export_only_prof(self):
        if self._export_only_mode:
            self.delete_prof_dir()
