"""npu tensors in RPC messages of the NPU_TENSORPIPE backend.

A request's npu tensor arrives on the device the caller's device map names for the callee; a reply's npu
tensor arrives on the caller's device that maps to the one it left (torch_npu's reverse map). Without a
mapping the call fails with TensorPipe's message, as on the card. The bytes travel as a host copy through
the agent's CPU channels (npu memory is host memory here); the copies are autograd operations, so
distributed autograd reaches the npu tensors on both sides.
"""

import contextlib
import functools
import threading

import torch
from torch.distributed.rpc import api, internal
from torch.distributed.rpc import functions as rpc_functions
from torch.distributed.rpc.constants import UNSET_RPC_TIMEOUT
from torch.utils._pytree import tree_leaves

_NO_MAPPING = (
    "TensorPipe RPC backend only supports CPU tensors by default, please move your tensors to CPU before sending "
    "them over RPC, or call `set_device_map` on `TensorPipeRpcBackendOptions` to explicitly configure device "
    "mapping. "
)


class _DeviceMaps:
    def __init__(self, agent, name, maps, devices):
        self.agent, self.name, self.maps, self.devices = agent, name, maps, list(devices)

    def request_target(self, to, device):
        if to not in self.maps:
            raise RuntimeError(
                f"{_NO_MAPPING}Request device mapping is not available for destination {to}, but found tensor on "
                f"device: {device}"
            )
        if device not in self.maps[to]:
            raise RuntimeError(
                f"{_NO_MAPPING}Request device mapping is not available for destination {to} for device {device} "
                "but received a tensor on that device."
            )
        return self.maps[to][device]

    def reply_target(self, sender, device):
        if sender not in self.maps:
            raise RuntimeError(
                f"{_NO_MAPPING}Response device mapping is not available for destination {self.name}, but found "
                f"tensor on device: {device}"
            )
        reverse = {target: source for source, target in self.maps[sender].items()}
        if device not in reverse:
            raise RuntimeError(
                f"{_NO_MAPPING}Response device mapping is not available for destination {self.name} for device "
                f"{device} but received a tensor on that device."
            )
        return reverse[device]


_maps = None
_serializing = threading.local()  # .request_to: the worker the request being serialized goes to


def activate(agent, name, maps, devices):
    """Called by the backend's init: `agent` is this process's agent, `maps` its device maps."""
    global _maps
    _maps = _DeviceMaps(agent, name, maps, devices)


def _active():
    maps = _maps
    if maps is None or not api._is_current_rpc_agent_set():
        return None
    return maps if api._get_current_rpc_agent() is maps.agent else None


def device_maps():
    maps = _active()
    return maps.maps if maps else {}


def devices():
    maps = _active()
    return maps.devices if maps else []


def _received_on(index, device):
    return internal._InternalRPCPickler._tensor_receiver(index).to(device)


def _reply_received(index, sender, device):
    maps = _active()
    target = maps.reply_target(sender, torch.device(device)) if maps else torch.device(device)
    return internal._InternalRPCPickler._tensor_receiver(index).to(target)


def tensor_reducer(original):
    """The RPC pickler's reducer for tensors: npu tensors leave as host copies tagged with their device."""

    def reduce(tensor):
        maps = _active() if tensor.device.type == "npu" else None
        if maps is None:
            return original(tensor)
        to = getattr(_serializing, "request_to", None)
        target = None if to is None else maps.request_target(to, tensor.device)  # refused before any copy
        _, (index,) = original(tensor.cpu())
        if target is not None:
            return _received_on, (index, str(target))
        return _reply_received, (index, maps.name, str(tensor.device))

    return reduce


def _call(func, payload, tensors):
    """Runs on the callee once distributed autograd has attached the message's tensors: the arguments are
    unpickled only now, so the copies that put them on their npu devices join the autograd graph."""
    args, kwargs = internal._internal_rpc_pickler.deserialize(payload, tensors)
    return func(*args, **kwargs)


@rpc_functions.async_execution
def _call_async(func, payload, tensors):
    return _call(func, payload, tensors)


def _in_autograd_context():
    try:
        torch._C._distributed_autograd._current_context()
    except RuntimeError:
        return False
    return True


def _as_npu_call(func, args, kwargs):
    """The function and arguments to send. A call whose arguments hold npu tensors (or any call made inside a
    distributed autograd context) sends its arguments pickled on their own, to be unpickled when the callee
    runs it: the callee attaches the received tensors to distributed autograd after unpickling the message
    and before running it. Builtin operators take this path too (the builtin path hands npu tensors to the
    agent). TorchScript functions are sent as they are."""
    if isinstance(func, torch.jit.ScriptFunction):
        return func, args, kwargs
    leaves = tree_leaves((args or (), kwargs or {}))
    if not any(isinstance(x, torch.Tensor) and x.device.type == "npu" for x in leaves) and not _in_autograd_context():
        return func, args, kwargs
    payload, tensors = internal._internal_rpc_pickler.serialize((tuple(args or ()), dict(kwargs or {})))
    call = _call_async if hasattr(func, "_wrapped_async_rpc_function") else _call
    return call, (func, payload, tensors), None


@contextlib.contextmanager
def _requests_to(to):
    previous = getattr(_serializing, "request_to", None)
    _serializing.request_to = api._to_worker_info(to).name
    try:
        yield
    finally:
        _serializing.request_to = previous


def invoke_rpc(original):
    """api._invoke_rpc (rpc_sync, rpc_async) with npu tensors mapped; a missing mapping fails the future."""

    def _invoke_rpc(to, func, rpc_type, args=None, kwargs=None, rpc_timeout=UNSET_RPC_TIMEOUT):
        if _active() is None:
            return original(to, func, rpc_type, args, kwargs, rpc_timeout)
        with _requests_to(to):
            try:
                func, args, kwargs = _as_npu_call(func, args, kwargs)
                return original(to, func, rpc_type, args, kwargs, rpc_timeout)
            except RuntimeError as e:
                if not str(e).startswith(_NO_MAPPING):
                    raise
                failed = torch.futures.Future()
                failed.set_exception(e)
                return failed

    return _invoke_rpc


def remote(original):
    """rpc.remote with npu tensors mapped."""

    @functools.wraps(original)
    def remote(to, func, args=None, kwargs=None, timeout=UNSET_RPC_TIMEOUT):
        if _active() is None:
            return original(to, func, args, kwargs, timeout)
        with _requests_to(to):
            func, args, kwargs = _as_npu_call(func, args, kwargs)
            return original(to, func, args, kwargs, timeout)

    return remote


def _owner_value(rref):
    return rref.local_value()


def to_here(original):
    """RRef.to_here fetches through a Python call under NPU_TENSORPIPE: an RRef holding tensors (rpc.RRef(t),
    a module's parameter RRefs) is otherwise fetched by TensorPipe's builtin path, which hands npu tensors to
    the agent without their mapping."""

    @functools.wraps(original)
    def to_here(self, timeout=UNSET_RPC_TIMEOUT):
        if _active() is None or self.is_owner():
            return original(self, timeout)
        return api.rpc_sync(self.owner(), _owner_value, args=(self,), timeout=timeout)

    return to_here
