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


def _get_device_count_info():
    backend = _get_privateuse1_backend_name()
    return {backend: getattr(torch, backend).device_count()}


def _tensorpipe_validate_devices(devices, counts):
    return all(d.type == "cpu" or 0 <= (d.index if d.index is not None else 0) < counts.get(d.type, 0) for d in devices)


def _refuse(text):
    raise ValueError(text + dist_error(ErrCode.VALUE))


def _check_node(node, devices, counts):
    if len(set(devices)) != len(devices):
        _refuse(f"Node {node} has duplicated devices\ndevices = {devices}")
    if not _tensorpipe_validate_devices(devices, counts):
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
        elif node in all_counts and not _tensorpipe_validate_devices(ends, all_counts[node]):
            _refuse(
                f"Node {source} has {side} devices with invalid indices in its device map for {target}\n"
                f"device map = {map_}\ndevice count = {all_counts[node]}"
            )


def _validate_device_maps(all_names, all_counts, all_maps, all_devices, is_static_group=True):
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


def _init_device_state(custom_backend_name):
    device_module = getattr(torch, custom_backend_name)
    if device_module.is_available():
        device_module.init()


def _tensorpipe_exchange_and_check_all_device_maps(my_name, my_device_count, my_device_maps, my_devices, group):
    """Gathers every worker's name, device counts, maps and devices, checks them all, and returns this
    worker's reverse maps (towards each worker that maps to it) and the devices its maps use."""
    gathered = [None] * group.size()
    dist.all_gather_object(gathered, (my_name, my_device_count, my_device_maps, my_devices), group)
    names = [g[0] for g in gathered]
    all_maps = {g[0]: g[2] for g in gathered}
    _validate_device_maps(names, {g[0]: g[1] for g in gathered}, all_maps, {g[0]: g[3] for g in gathered})
    reverse = rpc.backend_registry._create_reverse_mapping(my_name, names, all_maps)
    return reverse, rpc.backend_registry._create_device_list(my_devices, my_device_maps, reverse)


def _set_devices_and_reverse_device_map(agent):
    """A worker joining a dynamic group: checks its maps against those of the workers already there."""
    from torch_npu.distributed.rpc import tensor_transfer

    name = agent.get_worker_info().name
    infos = {name: (_get_device_count_info(), tensor_transfer.device_maps(), tensor_transfer.devices())}
    for worker in agent.get_worker_infos():
        if worker.name != name:
            infos[worker.name] = api.rpc_sync(worker.name, _get_device_infos)
    _validate_device_maps(
        list(infos),
        {n: i[0] for n, i in infos.items()},
        {n: i[1] for n, i in infos.items()},
        {n: i[2] for n, i in infos.items()},
        is_static_group=False,
    )


def _get_device_infos():
    """What this worker tells a worker that joins a dynamic group (run there through rpc_sync)."""
    from torch_npu.distributed.rpc import tensor_transfer

    return _get_device_count_info(), tensor_transfer.device_maps(), tensor_transfer.devices()


def _npu_tensorpipe_construct_rpc_backend_options_handler(
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


def _npu_tensorpipe_init_backend_handler(store, name, rank, world_size, rpc_backend_options):
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
        _tensorpipe_exchange_and_check_all_device_maps(name, _get_device_count_info(), maps, devices, group)
        if devices or any(map_ for map_ in maps.values()):
            _init_device_state(_get_privateuse1_backend_name())
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
            _set_devices_and_reverse_device_map(agent)
        except Exception:
            api.shutdown()
            raise
        return agent


# torch_npu's module names for torch's own registry helpers (its tests import them from here)
_backend_type_repr = rpc.backend_registry._backend_type_repr
_construct_rpc_backend_options = rpc.backend_registry.construct_rpc_backend_options
_init_backend = rpc.backend_registry.init_backend


def _rpc_backend_registry():
    """Registers NPU_TENSORPIPE with torch.distributed.rpc (BackendType gains the member); False if it is
    registered already."""
    if rpc.backend_registry.backend_registered("NPU_TENSORPIPE"):
        return False
    rpc.backend_registry.register_backend(
        "NPU_TENSORPIPE", _npu_tensorpipe_construct_rpc_backend_options_handler, _npu_tensorpipe_init_backend_handler
    )
    rpc.BackendType = rpc.backend_registry.BackendType
    return True
