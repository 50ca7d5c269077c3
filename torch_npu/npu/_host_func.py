"""Host functions on a stream (torch_npu's `_subscribe_report`, `_launch_host_func`, `_unsubscribe_report`, over
ACL's aclrtSubscribeReport / aclrtLaunchCallback): a Python callable runs when the stream reaches it. Inference
engines launch them while capturing an NPU graph (a KV-cache offload between two layers), so the callable runs
at every replay, in stream order.

On the card a report thread subscribed to the stream makes the call. vnpu runs each task when it is issued, so
the stream has reached the host function as soon as it is launched: outside a capture it runs at once, on the
calling thread (an exception it raises reaches the caller, where the card's report thread would drop it); while
a graph captures the stream it runs at each replay only, never at capture (the card does not run a captured
task either)."""

import functools

import torch

from torch_npu import _C

_subscribed = set()  # (device_type, device_index, stream_id) of the streams with a report thread


def _key(op_stream, what):
    if not isinstance(op_stream, torch.Stream):
        raise TypeError(f"{what}: op_stream must be a torch.npu.Stream, but got {type(op_stream).__name__}")
    return (op_stream.device_type, op_stream.device_index, op_stream.stream_id)


def run_when_replayed(name, action):
    """Runs `action` at each replay of the graph capturing the current stream, or now when none captures it."""
    if not _C._graph_record_host_kernel(name, action):
        action()


def _subscribe_report(op_stream):
    """Binds the report thread that runs the stream's host functions (subscribing again changes nothing)."""
    _subscribed.add(_key(op_stream, "_subscribe_report"))


def _unsubscribe_report(op_stream):
    """Unbinds the stream's report thread: launching a host function on it needs a subscription again. Graphs
    already captured keep the host functions they hold."""
    _subscribed.discard(_key(op_stream, "_unsubscribe_report"))


def _launch_host_func(op_stream, fn, user_data):
    """Calls `fn(user_data)` when `op_stream` reaches this point: at every replay of the graph capturing the
    stream, or now outside a capture. The stream must be subscribed (`_subscribe_report`) first."""
    if _key(op_stream, "_launch_host_func") not in _subscribed:
        raise RuntimeError(
            f"_launch_host_func: stream {op_stream} has no report thread to run host functions (aclrtLaunchCallback "
            "needs a subscribed stream): call torch_npu.npu._subscribe_report(stream) first"
        )
    with torch.npu.stream(op_stream):
        run_when_replayed("host_func", functools.partial(fn, user_data))
