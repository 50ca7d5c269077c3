"""NPUDTensorTestBase: PyTorch's DTensorTestBase on npu devices (hccl), as torch_npu's DTensor tests use it."""

from torch._utils import _get_device_module
from torch.testing._internal.distributed._tensor.common_dtensor import DTensorTestBase

__all__ = ["NPUDTensorTestBase"]


class NPUDTensorTestBase(DTensorTestBase):
    @property
    def device_type(self):
        return "npu"

    @property
    def world_size(self):
        # four ranks, or as many as there are devices when fewer (but more than one)
        count = _get_device_module(self.device_type).device_count()
        return min(4, count) if count > 1 else 4
