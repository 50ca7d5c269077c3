"""torch_npu.npu.aclnn: settings of the aclnn operator library (allow_hf32 for convolutions)."""

import sys
import types

from torch_npu.npu.aclnn.backends import version

__all__ = ["version", "allow_hf32"]


class _AclnnModule(types.ModuleType):
    @property
    def allow_hf32(self):
        from torch_npu.npu import npu_config

        return npu_config._get_conv_hf32()

    @allow_hf32.setter
    def allow_hf32(self, value):
        from torch_npu.npu import npu_config

        npu_config._set_conv_hf32(value)


sys.modules[__name__].__class__ = _AclnnModule
