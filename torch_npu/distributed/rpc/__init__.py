"""torch_npu.distributed.rpc: the NPU_TENSORPIPE backend of torch.distributed.rpc (registered by the patch
registry at import of torch_npu) and its options, NPUTensorPipeRpcBackendOptions."""

__all__ = []

import torch.distributed.rpc as rpc

if rpc.is_available():
    from . import backend_registry  # noqa: F401
