"""torch_npu.testing.common_distributed under its private name."""

from torch_npu.testing.common_distributed import *  # noqa: F403
from torch_npu.testing.common_distributed import __all__  # noqa: F401
