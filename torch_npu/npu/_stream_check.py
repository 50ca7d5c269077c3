"""The stream check of torch_npu's sanitizer: every operator's reads and writes of npu memory, with the stream it
ran on, go to PyTorch's stream-race analysis (torch.cuda._sanitizer.EventHandler, which knows nothing of CUDA
itself); the runtime's trace points tell it which streams waited for which. An access that the card could run
concurrently with an earlier conflicting one raises CUDASanitizerErrors (torch_npu raises the same class).

It also finds the missing record_stream (torch_npu's record-stream check): memory freed while another stream may
still use it goes back to the pool of the stream that allocated it, and that stream's next tensor in it can be
written before the other stream is done; Tensor.record_stream(other) or ordering the streams prevents it.

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


class FreedWhileInUseError(csan.UnsynchronizedAccessError):
    """A kernel used memory that was freed while another stream's access to it may still have been running."""

    def __str__(self):
        header, rest = super().__str__().split("\n", 2)[1:]
        return (
            f"============================\n{header}: the memory was freed and reused while stream "
            f"{self.previous_access.stream} may still use it (call Tensor.record_stream on that stream before "
            f"freeing, or make the streams wait for each other)\n{rest}"
        )


class NPURecordStreamHandler(csan.EventHandler):
    """PyTorch's race analysis, plus uses of freed memory by streams other than the one that allocated it."""

    def __init__(self):
        super().__init__()
        self.allocation_stream = {}  # data pointer -> the stream its memory was allocated on
        self.recorded_streams = {}  # data pointer -> the streams given to Tensor.record_stream
        self.freed_uses = {}  # data pointer -> (allocating stream, other streams' accesses when it was freed)

    def _handle_memory_allocation(self, data_ptr):
        super()._handle_memory_allocation(data_ptr)
        self.allocation_stream[data_ptr] = torch_npu.npu.current_stream().npu_stream

    def _handle_record_stream(self, data_ptr, stream):
        self.recorded_streams.setdefault(data_ptr, set()).add(stream)

    def _handle_erase_stream(self, data_ptr, stream):
        self.recorded_streams.get(data_ptr, set()).discard(stream)

    def _handle_memory_deallocation(self, data_ptr):
        info = self.tensors_accessed.accesses.get(data_ptr)
        owner = self.allocation_stream.pop(data_ptr, None)
        recorded = self.recorded_streams.pop(data_ptr, set())
        if info is not None and owner is not None:
            accesses = ([info.write] if info.write is not None else []) + info.reads
            uses = [a for a in accesses if a.stream != owner and a.stream not in recorded]
            if uses:
                self.freed_uses[data_ptr] = (owner, uses)
        super()._handle_memory_deallocation(data_ptr)

    def _handle_kernel_launch(self, stream, read_only, read_write, outputs, operator, tensor_aliases):
        errors = super()._handle_kernel_launch(stream, read_only, read_write, outputs, operator, tensor_aliases)
        for data_ptr in read_only | read_write:
            freed = self.freed_uses.pop(data_ptr, None)
            # the card reuses freed memory only on the stream that allocated it
            if freed is None or self.allocation_stream.get(data_ptr) != freed[0]:
                continue
            info = self.tensors_accessed.accesses[data_ptr]
            current = info.write if data_ptr in read_write else info.reads[-1]
            for use in freed[1]:
                if not self.syncs.is_ordered_after(stream, use.seq_num, use.stream):
                    errors.append(FreedWhileInUseError(data_ptr, info.allocation_stack_trace, current, use))
        return errors


class NPUSanitizerDispatchMode(TorchDispatchMode):
    def __init__(self, event_handler: csan.EventHandler):
        super().__init__()
        self.event_handler = event_handler

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten.record_stream.default:  # not a kernel (the runtime's trace point reports it)
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
