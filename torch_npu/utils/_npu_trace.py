"""Callbacks of the runtime's trace points (torch_npu's npu trace): events created, deleted, recorded, waited on
and synchronised, streams created and synchronised, the device synchronised, memory allocated, freed and recorded
on a stream (Tensor.record_stream), and torch_npu.erase_stream undoing such a record.
`torch_npu._C._activate_npu_trace(mode)` makes the runtime call `_fire` at each point; the sanitizer
(torch_npu.npu._sanitizer) registers its handlers here. Streams are their native handles (Stream.npu_stream),
events their addresses, memory its data pointer."""

import logging
import os
from collections.abc import Callable

__all__ = []

_logger = logging.getLogger(__name__)


def print_check_msg(msg: str):
    print(f"[sanitizer]({os.getpid()}) {msg}")


class CallbackRegistry:
    """Named callbacks of one trace point; a callback that raises is logged and the others still run."""

    def __init__(self, name: str):
        self.name = name
        self.callback_list = []

    def add_callback(self, cb: Callable, cb_name: str) -> None:
        self.callback_list.append((cb, cb_name))

    def fire_callbacks(self, *args) -> None:
        for cb, cb_name in self.callback_list:
            try:
                cb(*args)
            except Exception:
                _logger.exception("Exception in callback %s for %s registered with NPU trace", cb_name, self.name)


NPUEventCreationCallbacks = CallbackRegistry("NPU event creation")
NPUEventDeletionCallbacks = CallbackRegistry("NPU event deletion")
NPUEventRecordCallbacks = CallbackRegistry("NPU event record")
NPUEventWaitCallbacks = CallbackRegistry("NPU event wait")
NPUMemoryAllocationCallbacks = CallbackRegistry("NPU memory allocation")
NPUMemoryDeallocationCallbacks = CallbackRegistry("NPU memory deallocation")
NPUStreamCreationCallbacks = CallbackRegistry("NPU stream creation")
NPUDeviceSynchronizationCallbacks = CallbackRegistry("NPU device synchronization")
NPUStreamSynchronizationCallbacks = CallbackRegistry("NPU stream synchronization")
NPUEventSynchronizationCallbacks = CallbackRegistry("NPU event synchronization")
NPURecordStreamCallbacks = CallbackRegistry("NPU record stream")
NPUEraseStreamCallbacks = CallbackRegistry("NPU erase stream")  # fired by torch_npu.erase_stream itself

# the runtime's trace points in its order (csrc/runtime/DeviceTrace.h), with the arguments each passes on
POINTS = (
    ("event_creation", NPUEventCreationCallbacks, 1),
    ("event_deletion", NPUEventDeletionCallbacks, 1),
    ("event_record", NPUEventRecordCallbacks, 2),
    ("event_wait", NPUEventWaitCallbacks, 2),
    ("memory_allocation", NPUMemoryAllocationCallbacks, 1),
    ("memory_deallocation", NPUMemoryDeallocationCallbacks, 1),
    ("stream_creation", NPUStreamCreationCallbacks, 1),
    ("device_synchronization", NPUDeviceSynchronizationCallbacks, 0),
    ("stream_synchronization", NPUStreamSynchronizationCallbacks, 1),
    ("event_synchronization", NPUEventSynchronizationCallbacks, 1),
    ("record_stream", NPURecordStreamCallbacks, 2),
)


def _fire(point: int, first: int, second: int) -> None:
    _, registry, arity = POINTS[point]
    registry.fire_callbacks(*(first, second)[:arity])


def register_callback_for_npu_event_creation(cb: Callable[[int], None], cb_name: str) -> None:
    NPUEventCreationCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_event_deletion(cb: Callable[[int], None], cb_name: str) -> None:
    NPUEventDeletionCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_event_record(cb: Callable[[int, int], None], cb_name: str) -> None:
    NPUEventRecordCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_event_wait(cb: Callable[[int, int], None], cb_name: str) -> None:
    NPUEventWaitCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_memory_allocation(cb: Callable[[int], None], cb_name: str) -> None:
    NPUMemoryAllocationCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_memory_deallocation(cb: Callable[[int], None], cb_name: str) -> None:
    NPUMemoryDeallocationCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_stream_creation(cb: Callable[[int], None], cb_name: str) -> None:
    NPUStreamCreationCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_device_synchronization(cb: Callable[[], None], cb_name: str) -> None:
    NPUDeviceSynchronizationCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_stream_synchronization(cb: Callable[[int], None], cb_name: str) -> None:
    NPUStreamSynchronizationCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_event_synchronization(cb: Callable[[int], None], cb_name: str) -> None:
    NPUEventSynchronizationCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_record_stream(cb: Callable[[int, int], None], cb_name: str) -> None:
    NPURecordStreamCallbacks.add_callback(cb, cb_name)


def register_callback_for_npu_erase_stream(cb: Callable[[int, int], None], cb_name: str) -> None:
    NPUEraseStreamCallbacks.add_callback(cb, cb_name)
