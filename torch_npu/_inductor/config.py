"""Inductor settings for npu graphs (applied when torch._inductor.config is imported).

* `npu_backend`: torch_npu's choice of kernel generator — "default" (Triton-Ascend), "mlir", "dvm",
  "ascendc" — as `torch._inductor.config.npu_backend`, `torch.compile(options={"npu_backend": ...})` or
  `TORCHINDUCTOR_NPU_BACKEND` (read when inductor is imported). On vnpu every choice compiles the
  same host C++ kernels; the value is validated so that programs written for Ascend run unchanged.
* `npugraph_trees.disable_cpu_input_check`: a graph that reads CPU tensors (sequence lengths, small scalars)
  is still captured by backend="npugraphs" (torch_npu.utils._graph_tree.check_multiple_devices_or_any_cpu_nodes
  ignores its CPU nodes); setting it true also turns off inductor's slow-path graph asserts, as torch_npu does.
"""

import logging
import os

# torch_npu's inductor logger (its static-kernel compiler reports through it)
log = logging.getLogger("torch_npu._inductor")

NPU_BACKENDS = ("default", "mlir", "dvm", "ascendc")
_ENV = "TORCHINDUCTOR_NPU_BACKEND"


def check_npu_backend(value):
    if value not in NPU_BACKENDS:
        source = f" ({_ENV}={os.environ[_ENV]!r})" if os.environ.get(_ENV) == value else ""
        raise ValueError(f"npu_backend must be one of {', '.join(map(repr, NPU_BACKENDS))}, got {value!r}{source}")
    return value


def add_npu_backend_option():
    from torch._inductor import config
    from torch.utils._config_module import _Config, _ConfigEntry

    if "npu_backend" in config._config:
        return False
    config._config["npu_backend"] = _ConfigEntry(_Config(default=os.environ.get(_ENV, "default")), "npu_backend")
    config._get_dict_dirty_keys_var.set(None)
    config._hash_dirty_var.set(True)
    return True


class _NpuGraphTreesConfig:
    """torch_npu._inductor.config.npugraph_trees."""

    def __init__(self):
        self._disable_cpu_input_check = False

    @property
    def disable_cpu_input_check(self):
        return self._disable_cpu_input_check

    @disable_cpu_input_check.setter
    def disable_cpu_input_check(self, value):
        self._disable_cpu_input_check = bool(value)
        if value:
            import torch._inductor.config

            torch._inductor.config.triton.slow_path_cudagraph_asserts = False


npugraph_trees = _NpuGraphTreesConfig()
