"""torch_npu.npu.npurt: the NPU runtime's own queries (device count, versions, capacities)."""

import itertools

from torch_npu import _C

# Raw stream handles npuStreamCreate gives out: opaque, non-zero, never reused while alive.
_next_handle = itertools.count(0x5E000001)
_live_streams = set()


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

    @staticmethod
    def npuStreamCreate():
        """A new raw stream handle (aclrtCreateStream's), for torch.npu.ExternalStream."""
        handle = next(_next_handle)
        _live_streams.add(handle)
        return handle

    @staticmethod
    def npuStreamDestroy(stream):
        """Release a handle npuStreamCreate gave; a handle it did not give (or gave and took back) is an error."""
        if stream not in _live_streams:
            raise RuntimeError(f"npuStreamDestroy: {stream!r} is not a stream created by npuStreamCreate")
        _live_streams.discard(stream)
