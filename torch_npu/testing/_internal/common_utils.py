"""torch_npu.testing.common_utils under its private name."""

from torch_npu.testing.common_utils import *  # noqa: F403
from torch_npu.testing.common_utils import __all__  # noqa: F401
