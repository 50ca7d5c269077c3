"""NPUTensorPipeRpcBackendOptions: TensorPipe's RPC options with npu devices in the device maps."""

import torch
import torch.distributed.rpc.constants as rpc_constants
from torch._C import _get_privateuse1_backend_name
from torch._C._distributed_rpc import _TensorPipeRpcBackendOptionsBase

from torch_npu.utils._error_code import ErrCode, dist_error

__all__ = ["NPUTensorPipeRpcBackendOptions"]

DeviceType = int | str | torch.device


def _npu_device(device: DeviceType) -> torch.device:
    device = torch.device(device)
    backend = _get_privateuse1_backend_name()
    if device.type != backend:
        raise ValueError(
            f"`set_devices` expect a list of {backend} devices, but got device type {device.type}."
            + dist_error(ErrCode.VALUE)
        )
    return device


def _one_to_one(device_map: dict[DeviceType, DeviceType]) -> dict[torch.device, torch.device]:
    mapped: dict[torch.device, torch.device] = {}
    sources: dict[torch.device, torch.device] = {}  # target -> the source already mapped to it
    for source, target in device_map.items():
        source, target = torch.device(source), torch.device(target)
        if target in sources:
            raise ValueError(
                f"`device_map` only supports 1-to-1 mapping, trying to map {source} and {sources[target]} to {target}"
                + dist_error(ErrCode.VALUE)
            )
        mapped[source] = target
        sources[target] = source
    return mapped


class NPUTensorPipeRpcBackendOptions(_TensorPipeRpcBackendOptionsBase):
    """The options of the NPU_TENSORPIPE backend: `device_maps` map this worker's npu devices to each
    callee's (the replies travel the reverse map), `devices` lists the npu devices RPC may use here."""

    def __init__(
        self,
        *,
        num_worker_threads: int = rpc_constants.DEFAULT_NUM_WORKER_THREADS,
        rpc_timeout: float = rpc_constants.DEFAULT_RPC_TIMEOUT_SEC,
        init_method: str = rpc_constants.DEFAULT_INIT_METHOD,
        device_maps: dict[str, dict[DeviceType, DeviceType]] | None = None,
        devices: list[DeviceType] | None = None,
        _transports: list | None = None,
        _channels: list | None = None,
    ):
        super().__init__(
            num_worker_threads,
            _transports,
            _channels,
            rpc_timeout,
            init_method,
            {to: _one_to_one(m) for to, m in (device_maps or {}).items()},
            [_npu_device(d) for d in devices or ()],
        )
        self._tensorpipe_transports, self._tensorpipe_channels = (
            _transports,
            _channels,
        )  # the agent's own options are built from these

    def set_device_map(self, to: str, device_map: dict[DeviceType, DeviceType]):
        """Adds `device_map` to the map towards worker `to` (a source already mapped must keep its target)."""
        new = _one_to_one(device_map)
        current = super().device_maps.get(to, {})
        for source, target in new.items():
            if source in current and current[source] != target:
                raise ValueError(
                    f"`set_device_map` only supports 1-to-1 mapping, trying to map {source} to {target} and "
                    f"{current[source]}" + dist_error(ErrCode.VALUE)
                )
        super()._set_device_map(to, new)

    def set_devices(self, devices: list[DeviceType]):
        self.devices = [_npu_device(d) for d in devices]
