"""torch.distributed.rpc changes for the NPU_TENSORPIPE backend (torch_npu.distributed.rpc holds the code)."""

import torch
import torch.distributed.rpc as rpc


def npu_tensorpipe_backend():
    if not rpc.is_available():
        return False
    from torch_npu.distributed.rpc.backend_registry import _rpc_backend_registry

    return _rpc_backend_registry()


def npu_tensors_in_rpc_messages():
    if not rpc.is_available():
        return False
    from torch.distributed.rpc import api, internal

    from torch_npu.distributed.rpc import tensor_transfer

    pickler = internal._internal_rpc_pickler
    if getattr(pickler._dispatch_table[torch.Tensor], "__module__", "") == tensor_transfer.__name__:
        return False
    pickler._dispatch_table[torch.Tensor] = tensor_transfer.tensor_reducer(pickler._dispatch_table[torch.Tensor])
    api._invoke_rpc = tensor_transfer.invoke_rpc(api._invoke_rpc)
    api.remote = rpc.remote = tensor_transfer.remote(api.remote)
    rpc.PyRRef.to_here = tensor_transfer.to_here(rpc.PyRRef.to_here)
    return True
