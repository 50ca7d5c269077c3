"""One worker of a torch.distributed.rpc test on the NPU_TENSORPIPE backend (tests/test_distributed_rpc.py
starts WORLD_SIZE of them: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment).

    python rpc_worker.py CASE

Worker r is "worker<r>" on npu:r. worker0 maps npu:0 to worker1's npu:1 and to worker2's npu:2, worker1 maps
npu:1 to worker2's npu:2, worker2 has no map. A failed check raises (non-zero exit); success prints "ok"."""

import os
import sys

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch import nn
from torch.distributed.nn.api.remote_module import RemoteModule

from torch_npu.distributed.rpc.options import NPUTensorPipeRpcBackendOptions

RANK, WORLD = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
MAPS = {0: {"worker1": {"npu:0": "npu:1"}, "worker2": {"npu:0": "npu:2"}}, 1: {"worker2": {"npu:1": "npu:2"}}}


def located(*tensors):
    """Runs on the callee: where each argument arrived, and the arguments."""
    return [str(t.device) for t in tensors], tensors


def doubled_on(device, t):
    return (t * 2).to(device)


@rpc.functions.async_execution
def located_further(to, *tensors):
    """Runs on worker1: forwards its arguments to `to` and replies with what `to` saw."""
    return rpc.rpc_async(to, located, args=tensors)


NO_MAPPING = (
    "TensorPipe RPC backend only supports CPU tensors by default, please move your tensors to CPU before sending "
    "them over RPC, or call `set_device_map` on `TensorPipeRpcBackendOptions` to explicitly configure device "
    "mapping. "
)


def expect_error(text, call, reply=False):
    """`call` fails with TensorPipe's message for a tensor without a device mapping, ending in `text`. A reply's
    error is raised while RPC unpickles the reply, and RPC re-raises it naming its type first."""
    try:
        call()
    except RuntimeError as e:
        assert str(e).startswith(("RuntimeError: " if reply else "") + NO_MAPPING + text), str(e)
        return
    raise AssertionError(f"no error {text!r}")


def same(a, b):
    assert a.device == b.device and a.dtype == b.dtype and torch.equal(a.cpu(), b.cpu()), (a, b)


def caller_checks():
    x = torch.arange(12.0).reshape(3, 4).npu()
    host = torch.linspace(-1, 1, 5)
    devices, (a, b) = rpc.rpc_sync("worker1", located, args=(x, host))
    assert devices == ["npu:1", "cpu"], devices
    same(a, x)
    same(b, host)
    devices, (a,) = rpc.rpc_async("worker2", located, args=(x,)).wait()
    assert devices == ["npu:2"], devices
    same(a, x)
    same(rpc.rpc_sync("worker1", torch.add, args=(x, x)), x + x)  # a builtin operator on npu tensors
    rref = rpc.remote("worker1", torch.mul, args=(x, 3))
    same(rref.to_here(), x * 3)
    assert rref.owner_name() == "worker1" and not rref.is_owner()
    assert rref.rpc_sync().size() == torch.Size([3, 4]) and rref.remote().size().to_here() == torch.Size([3, 4])
    # worker1 forwards to worker2 through its own map (npu:1 -> npu:2); the replies come back the reverse way
    devices, (a, b) = rpc.rpc_sync("worker1", located_further, args=("worker2", x, host))
    assert devices == ["npu:2", "cpu"], devices
    same(a, x)
    same(b, host)
    # no mapping for the device of a request's tensor, or of a reply's
    expect_error(
        "Request device mapping is not available for destination worker1 for device npu:3 but received a tensor "
        "on that device.",
        lambda: rpc.rpc_async("worker1", located, args=(x.to("npu:3"),)).wait(),
    )
    expect_error(
        "Response device mapping is not available for destination worker0 for device npu:5 but received a tensor on "
        "that device.",
        lambda: rpc.rpc_sync("worker1", doubled_on, args=("npu:5", x)),
        reply=True,
    )
    same(rpc.rpc_sync("worker1", doubled_on, args=("npu:1", x)), x * 2)
    # distributed autograd through npu tensors on both workers equals local autograd on the CPU
    leaf = torch.linspace(-2, 2, 12).reshape(3, 4).requires_grad_()
    with dist_autograd.context() as context_id:
        product = rpc.rpc_sync("worker1", torch.mul, args=(leaf.npu(), leaf.npu()))
        assert product.device == torch.device("npu:0")
        dist_autograd.backward(context_id, [(product * 3).sum()])
        grad = dist_autograd.get_gradients(context_id)[leaf]
    reference = leaf.detach().clone().requires_grad_()
    (reference * reference * 3).sum().backward()
    same(grad, reference.grad)
    # a module on worker1's npu:1 computes what the same module computes here
    remote_linear = RemoteModule("worker1/npu:1", nn.Linear, args=(4, 3))
    weight, bias = (p.to_here() for p in remote_linear.remote_parameters())
    assert weight.device == torch.device("npu:0")
    same(remote_linear.forward(x), nn.functional.linear(x, weight, bias))


def main(case):
    assert case == "npu_tensorpipe", case
    torch.npu.set_device(RANK)
    options = NPUTensorPipeRpcBackendOptions(num_worker_threads=8, device_maps=MAPS.get(RANK), rpc_timeout=60)
    rpc.init_rpc(
        f"worker{RANK}",
        rank=RANK,
        world_size=WORLD,
        backend=rpc.BackendType.NPU_TENSORPIPE,
        rpc_backend_options=options,
    )
    try:
        if RANK == 0:
            caller_checks()
        if RANK == 2:  # no map at all towards worker0: neither its requests nor worker0's replies can hold npu tensors
            expect_error(
                "Request device mapping is not available for destination worker0, but found tensor on device: npu:2",
                lambda: rpc.rpc_sync("worker0", located, args=(torch.ones(2, device="npu"),)),
            )
            expect_error(
                "Response device mapping is not available for destination worker2, but found tensor on device: npu:0",
                lambda: rpc.rpc_sync("worker0", doubled_on, args=("npu:0", torch.ones(2))),
                reply=True,
            )
    finally:
        rpc.shutdown()  # graceful even after a failed check: the other workers are not left waiting
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
