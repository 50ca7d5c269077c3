"""Event calls in the profile: while torch_npu.profiler records, each call of torch.npu.Event's record, wait,
query, elapsed_time and synchronize runs inside a record_function range named `Event::<method>`, so the trace
shows where the host waited on or stamped device events, as torch_npu's profiler shows them. The wrapped method
keeps the original as `origin_func`; disabling restores it.
"""

import functools

import torch

__all__ = []

_METHODS = ("record", "wait", "query", "elapsed_time", "synchronize")


def _recorded(method):
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with torch.profiler.record_function(f"Event::{method.__name__}"):
            return method(*args, **kwargs)

    wrapper.origin_func = method
    return wrapper


def _event_class():
    from torch_npu.npu import Event

    return Event


def _enable_event_record():
    event = _event_class()
    for name in _METHODS:
        method = getattr(event, name)
        if not hasattr(method, "origin_func"):
            setattr(event, name, _recorded(method))


def _disable_event_record():
    event = _event_class()
    for name in _METHODS:
        method = getattr(event, name)
        setattr(event, name, getattr(method, "origin_func", method))
