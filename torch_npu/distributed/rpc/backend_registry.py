"""The NPU_TENSORPIPE RPC backend: PyTorch's TensorPipe agent, with npu tensors carried by device maps.

torch_npu builds its own TensorPipe agent with an NPU channel. vnpu's npu memory is host memory, so the
agent PyTorch ships carries the bytes over its CPU channels, and `tensor_transfer` puts each npu tensor on
the device the device maps name (the agent itself is given no device maps: it only ever sees host
tensors). Everything a user sees follows torch_npu: the backend name, the options class, the checks of
the device maps at init with their messages, the errors for tensors whose device has no mapping.
"""

__all__ = []

import torch
import torch.distributed as dist
import torch.distributed.rpc as rpc
from torch._C import _get_privateuse1_backend_name
from torch.distributed.rpc import api
from torch.distributed.rpc import constants as rpc_constants
from torch.distributed.rpc._utils import _group_membership_management

from torch_npu.utils._error_code import ErrCode, dist_error


def _device_counts():
    backend = _get_privateuse1_backend_name()
    return {backend: getattr(torch, backend).device_count()}


def _valid_indices(devices, counts):
    return all(d.type == "cpu" or 0 <= (d.index if d.index is not None else 0) < counts.get(d.type, 0) for d in devices)


def _refuse(text):
    raise ValueError(text + dist_error(ErrCode.VALUE))


def _check_node(node, devices, counts):
    if len(set(devices)) != len(devices):
        _refuse(f"Node {node} has duplicated devices\ndevices = {devices}")
    if not _valid_indices(devices, counts):
        _refuse(f"Node {node} has devices with invalid indices\ndevices = {devices}\ndevice count = {counts}")


def _check_map(source, target, map_, all_counts, all_devices):
    if len(set(map_.values())) != len(map_):
        _refuse(f"Node {source} has duplicated target devices in its device map for {target}\ndevice map = {map_}")
    for side, node, ends in (("source", source, map_.keys()), ("target", target, map_.values())):
        listed = all_devices.get(node) or []
        if listed:
            if not set(ends).issubset(listed):
                _refuse(
                    f"Node {source} has unexpected {side} devices in its device map for {target}\n"
                    f"device map = {map_}\ndevices = {listed}"
                )
        elif node in all_counts and not _valid_indices(ends, all_counts[node]):
            _refuse(
                f"Node {source} has {side} devices with invalid indices in its device map for {target}\n"
                f"device map = {map_}\ndevice count = {all_counts[node]}"
            )


def _check_device_maps(all_names, all_counts, all_maps, all_devices, is_static_group=True):
    """torch_npu's checks of every worker's device list and device maps, with its messages."""
    for node in all_names:
        _check_node(node, all_devices[node], all_counts[node])
    for source in all_names:
        if is_static_group and not set(all_maps[source]).issubset(all_names):
            _refuse(
                f"Node {source} has invalid target node names in its device maps\n"
                f"device maps = {all_maps[source].keys()}\nnode names = {all_names}"
            )
        for target, map_ in all_maps[source].items():
            _check_map(source, target, map_, all_counts, all_devices)


def _device_infos():
    """What this worker tells a worker that joins a dynamic group (run there through rpc_sync)."""
    from torch_npu.distributed.rpc import tensor_transfer

    return _device_counts(), tensor_transfer.device_maps(), tensor_transfer.devices()


def _construct_rpc_backend_options_handler(
    rpc_timeout,
    init_method,
    num_worker_threads=rpc_constants.DEFAULT_NUM_WORKER_THREADS,
    _transports=None,
    _channels=None,
    **kwargs,
):
    from .options import NPUTensorPipeRpcBackendOptions

    return NPUTensorPipeRpcBackendOptions(
        rpc_timeout=rpc_timeout,
        init_method=init_method,
        num_worker_threads=num_worker_threads,
        _transports=_transports,
        _channels=_channels,
    )


def _host_options(options):
    """The options the agent itself gets: the same, without device maps or devices."""
    from torch._C._distributed_rpc import _TensorPipeRpcBackendOptionsBase

    return _TensorPipeRpcBackendOptionsBase(
        options.num_worker_threads,
        options._tensorpipe_transports,
        options._tensorpipe_channels,
        options.rpc_timeout,
        options.init_method,
        {},
        [],
    )


def _init_backend_handler(store, name, rank, world_size, rpc_backend_options):
    from torch._C._distributed_rpc import TensorPipeAgent

    from torch_npu.distributed.rpc import tensor_transfer

    from .options import NPUTensorPipeRpcBackendOptions

    if not isinstance(store, dist.Store):
        raise TypeError(f"`store` must be a c10d::Store. {store}" + dist_error(ErrCode.TYPE))
    if not isinstance(rpc_backend_options, NPUTensorPipeRpcBackendOptions):
        raise TypeError(
            f"`rpc_backend_options` must be a `NPUTensorPipeRpcBackendOptions`. {rpc_backend_options}"
            + dist_error(ErrCode.TYPE)
        )
    maps, devices = rpc_backend_options.device_maps, rpc_backend_options.devices
    if world_size:  # a static group: every worker's maps are checked against every other's before any RPC
        group = rpc.backend_registry._init_process_group(store, rank, world_size)
        gathered = [None] * group.size()
        dist.all_gather_object(gathered, (name, _device_counts(), maps, devices), group)
        names = [g[0] for g in gathered]
        _check_device_maps(
            names, {g[0]: g[1] for g in gathered}, {g[0]: g[2] for g in gathered}, {g[0]: g[3] for g in gathered}
        )
        if devices or any(map_ for map_ in maps.values()):
            torch.npu.init()
        agent = TensorPipeAgent(store, name, rank, world_size, _host_options(rpc_backend_options), {}, [])
        tensor_transfer.activate(agent, name, maps, devices)
        api._init_rpc_states(agent)
        api._all_gather(None, timeout=rpc_backend_options.rpc_timeout)
        group.barrier().wait()
        return agent
    with _group_membership_management(store, name, True):
        agent = TensorPipeAgent(store, name, rank, world_size, _host_options(rpc_backend_options), {}, [])
        tensor_transfer.activate(agent, name, maps, devices)
        api._init_rpc_states(agent)
        try:
            infos = {name: (_device_counts(), maps, devices)}
            for worker in agent.get_worker_infos():
                if worker.name != name:
                    infos[worker.name] = api.rpc_sync(worker.name, _device_infos)
            _check_device_maps(
                list(infos),
                {n: i[0] for n, i in infos.items()},
                {n: i[1] for n, i in infos.items()},
                {n: i[2] for n, i in infos.items()},
                is_static_group=False,
            )
        except Exception:
            api.shutdown()
            raise
        return agent


def register_npu_tensorpipe():
    """Registers NPU_TENSORPIPE with torch.distributed.rpc (BackendType gains the member)."""
    if rpc.backend_registry.backend_registered("NPU_TENSORPIPE"):
        return False
    rpc.backend_registry.register_backend(
        "NPU_TENSORPIPE", _construct_rpc_backend_options_handler, _init_backend_handler
    )
    rpc.BackendType = rpc.backend_registry.BackendType
    return True
