"""The stream check of torch_npu's sanitizer: every operator's reads and writes of npu memory, with the stream it
ran on, go to PyTorch's stream-race analysis (torch.cuda._sanitizer.EventHandler, which knows nothing of CUDA
itself); the runtime's trace points tell it which streams waited for which. An access that the card could run
concurrently with an earlier conflicting one raises CUDASanitizerErrors (torch_npu raises the same class).

vnpu runs every operator in order on the host, so such a race never corrupts data here; on the card it may."""

import sys

import torch
import torch.cuda._sanitizer as csan
from torch.utils._python_dispatch import TorchDispatchMode

import torch_npu

__all__ = []


class _NpuArgumentHandler(csan.ArgumentHandler):
    """PyTorch's argument handler, for npu tensors."""

    def _handle_argument(self, value, is_write, metadata_only, name=None, is_output=False):
        if not (isinstance(value, torch.Tensor) and value.device.type == "npu"):
            return
        data_ptr = value.data_ptr() or id(value)  # empty tensors must not look alike
        if is_write:
            self.dataptrs_written.add(data_ptr)
        elif not metadata_only:
            self.dataptrs_read.add(data_ptr)
        self.tensor_aliases.setdefault(data_ptr, [])
        if name is not None:
            self.tensor_aliases[data_ptr].append(name)
        if is_output:
            self.outputs.add(data_ptr)


class NPUSanitizerDispatchMode(TorchDispatchMode):
    def __init__(self, event_handler: csan.EventHandler):
        super().__init__()
        self.event_handler = event_handler

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten.record_stream.default:  # not a kernel
            return func(*args, **kwargs)
        is_factory = bool(csan.FACTORY_FUNCTION_REGEX.match(func._schema.name))
        handler = _NpuArgumentHandler()
        handler.parse_inputs(func._schema, args, kwargs, is_factory=is_factory)
        outputs = func(*args, **kwargs)
        handler.parse_outputs(func._schema, outputs, is_factory=is_factory)
        if not (handler.dataptrs_read or handler.dataptrs_written):
            return outputs
        errors = self.event_handler._handle_kernel_launch(
            torch_npu.npu.current_stream().npu_stream,
            handler.dataptrs_read - handler.dataptrs_written,
            handler.dataptrs_written,
            handler.outputs,
            func._schema,
            handler.tensor_aliases,
        )
        if errors:
            for error in errors:
                print(error, file=sys.stderr)
            raise csan.CUDASanitizerErrors(errors)
        return outputs
