"""Looking into captured NPU graphs (torch_npu's graph DFX operators): print_npugraph_tensor and
save_npugraph_tensor show or save a tensor's contents each time a graph replays (the card runs them as host
functions of the graph); called outside a capture they act at once.

save_npugraph_tensor writes `torch.save` files next to save_path (default ./tensor.pt): `<stem>_device_<n>_<k>.pt`
with k counting the saves of that path in this process, or `<stem>_device_<n>.pt` rewritten each time with
overwrite=True; the tensor_list overload saves the list."""

import itertools
import os

import torch

from torch_npu.npu._host_func import run_when_replayed
from torch_npu.ops.registration import npu_op

__all__ = []

_save_counters = {}  # save path -> its counter of saved files


def _describe(tensor, tensor_name):
    host = tensor.detach().cpu()
    shown = f"{tensor_name}={host}" if tensor_name else f"{host}"
    return f"{shown}, shape={tuple(host.shape)}, dtype={host.dtype}"


@npu_op("print_npugraph_tensor(Tensor self, *, str? tensor_name=None) -> ()", fake=lambda self, **kwargs: None)
def print_npugraph_tensor(self, *, tensor_name=None):
    """Prints the tensor (`<tensor_name>=tensor(...)`, its shape and dtype) when the graph replays."""
    run_when_replayed("print_npugraph_tensor", lambda: print(_describe(self, tensor_name)))


def _target(save_path, device, overwrite):
    path = os.path.abspath(save_path or "tensor.pt")
    stem, suffix = os.path.splitext(path)
    if overwrite:
        return f"{stem}_device_{device}{suffix or '.pt'}"
    counter = _save_counters.setdefault(path, itertools.count())
    return f"{stem}_device_{device}_{next(counter)}{suffix or '.pt'}"


def _save(value, device, save_path, overwrite):
    def action():
        contents = [t.detach().cpu() for t in value] if isinstance(value, (list, tuple)) else value.detach().cpu()
        torch.save(contents, _target(save_path, device, overwrite))

    run_when_replayed("save_npugraph_tensor", action)


@npu_op(
    "save_npugraph_tensor(Tensor self, *, str? save_path=None, bool overwrite=False) -> ()",
    fake=lambda self, **kwargs: None,
)
def save_npugraph_tensor(self, *, save_path=None, overwrite=False):
    """Saves the tensor with torch.save when the graph replays (file names in the module docstring)."""
    _save(self, self.device.index, save_path, overwrite)


@npu_op(
    "save_npugraph_tensor.tensor_list(Tensor[] self, *, str? save_path=None, bool overwrite=False) -> ()",
    fake=lambda self, **kwargs: None,
)
def save_npugraph_tensor_list(self, *, save_path=None, overwrite=False):
    _save(list(self), self[0].device.index if self else 0, save_path, overwrite)
