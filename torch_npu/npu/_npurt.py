"""torch_npu.npu.npurt: the NPU runtime's own queries (device count, versions, capacities)."""

from torch_npu import _C


class npurt:
    """Static queries answered by the runtime (vnpu's software runtime)."""

    @staticmethod
    def device_count():
        return _C._device_count()

    @staticmethod
    def runtime_version():
        from torch_npu.npu.utils import get_cann_version

        return get_cann_version()

    @staticmethod
    def soc_name():
        return _C._soc_profile()["name"]

    @staticmethod
    def device_capacity():
        """Bytes of memory of each device (the SoC profile's HBM size)."""
        return _C._device_capacity()
