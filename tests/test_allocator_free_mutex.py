"""The allocator's free mutex (torch_npu._C._npu_lock_mutex / _npu_unlock_mutex): while a thread holds it,
no npu memory goes back to the host; memory is still allocated and cached as usual."""

import pytest
import torch
from subprocess_helpers import run_python

import torch_npu

C = torch_npu._C

# With caching off every free returns its segment to the host. A backward in another thread frees its
# intermediates from the autograd engine without the GIL, so those frees wait on the held mutex.
_HELD_DURING_BACKWARD = """
import threading, time, torch, torch_npu
x = torch.randn(256, 256, device="npu", requires_grad=True)
loss = (x.exp() * 2).sin().sum()
frees_before = torch.npu.memory_stats()["num_device_free"]
torch_npu._C._npu_lock_mutex()
worker = threading.Thread(target=loss.backward)
worker.start()
time.sleep(0.5)
blocked = worker.is_alive()
frees_while_held = torch.npu.memory_stats()["num_device_free"] - frees_before
torch_npu._C._npu_unlock_mutex()
worker.join(30)
print(blocked, frees_while_held, worker.is_alive(), bool(torch.equal(x.grad.cpu(), (2 * (x.detach().exp() * 2).cos() * x.detach().exp()).cpu())))
"""


def test_held_mutex_keeps_memory_from_the_host_until_released():
    out = run_python(_HELD_DURING_BACKWARD, env={"PYTORCH_NO_NPU_MEMORY_CACHING": "1"}, timeout=60)
    assert out.stdout.split() == ["True", "0", "False", "True"]


# empty_cache in another Python thread waits for the mutex without the GIL, so the holder's Python goes on.
_EMPTY_CACHE_WAITS_WITHOUT_THE_GIL = """
import threading, time, torch, torch_npu
x = torch.ones(1 << 20, device="npu")
del x
reserved = torch.npu.memory_reserved()
torch_npu._C._npu_lock_mutex()
worker = threading.Thread(target=torch.npu.empty_cache)
worker.start()
time.sleep(0.3)  # Python keeps running here while the worker waits
waited = worker.is_alive() and torch.npu.memory_reserved() == reserved
torch_npu._C._npu_unlock_mutex()
worker.join(30)
print(reserved > 0, waited, worker.is_alive(), torch.npu.memory_reserved())
"""


def test_empty_cache_waits_for_the_holder_without_the_gil():
    out = run_python(_EMPTY_CACHE_WAITS_WITHOUT_THE_GIL, timeout=60)
    assert out.stdout.split() == ["True", "True", "False", "0"]


def test_allocations_and_cached_frees_go_on_while_held():
    C._npu_lock_mutex()
    try:
        x = torch.ones(1024, device="npu")
        y = (x * 3).sum().item()
        del x
    finally:
        C._npu_unlock_mutex()
    assert y == 3072.0


def test_unlock_without_the_lock_and_double_lock_raise():
    with pytest.raises(RuntimeError, match="^the npu allocator's free mutex is not held by this thread"):
        C._npu_unlock_mutex()
    C._npu_lock_mutex()
    try:
        with pytest.raises(RuntimeError, match="^the npu allocator's free mutex is already held by this thread"):
            C._npu_lock_mutex()
    finally:
        C._npu_unlock_mutex()
