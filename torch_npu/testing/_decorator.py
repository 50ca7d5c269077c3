"""torch_npu.testing.decorator under the private name the same torch_npu releases' test files import (Dtypes,
Formats, instantiate_tests ...)."""

from torch_npu.testing.decorator import *  # noqa: F403
from torch_npu.testing.decorator import __all__  # noqa: F401
