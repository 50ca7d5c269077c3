"""torch.distributed.rpc on npu: the NPU_TENSORPIPE backend, its options and device maps.

The three-worker run (tests/rpc_worker.py) calls with npu tensors, builtin operators, remote references,
functions that call further, distributed autograd and a RemoteModule placed on another worker's npu; the
single-process run checks the options, the checks made at init, and that a worker can map to itself."""

import pytest
from subprocess_helpers import free_port, run_python
from test_distributed import WORKER, _all_ok, launch

RPC_WORKER = WORKER.replace("distributed_worker.py", "rpc_worker.py")


def test_three_workers_exchange_npu_tensors_through_their_device_maps():
    _all_ok(launch("npu_tensorpipe", 3, timeout=180, worker=RPC_WORKER))


def test_options_and_init_checks_follow_torch_npu_and_a_worker_maps_to_itself():
    code = f"""
        import os
        import torch, torch_npu
        import torch.distributed.rpc as rpc
        from torch_npu.distributed.rpc.options import NPUTensorPipeRpcBackendOptions as Options

        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="{free_port()}")

        def refused(error, text, call):
            try:
                call()
            except error as e:
                assert str(e).startswith(text), str(e)
                return str(e)
            raise AssertionError(text)

        def located(t):
            return str(t.device), t * 2

        message = refused(ValueError, "`set_devices` expect a list of npu devices, but got device type cpu.",
                          lambda: Options(devices=["cpu"]))
        assert "ERR02003 DIST invalid value" in message, message
        refused(ValueError, "`device_map` only supports 1-to-1 mapping, trying to map npu:2 and npu:0 to npu:1",
                lambda: Options(device_maps={{"w": {{"npu:0": "npu:1", "npu:2": "npu:1"}}}}))
        options = Options(device_maps={{"w": {{"npu:0": "npu:1"}}}})
        refused(ValueError, "`set_device_map` only supports 1-to-1 mapping, trying to map npu:0 to npu:2 and npu:1",
                lambda: options.set_device_map("w", {{"npu:0": "npu:2"}}))
        assert isinstance(rpc.backend_registry.construct_rpc_backend_options(rpc.BackendType.NPU_TENSORPIPE), Options)
        assert issubclass(Options, torch._C._distributed_rpc._TensorPipeRpcBackendOptionsBase)

        refused(ValueError, "Node worker0 has target devices with invalid indices in its device map for worker0\\n"
                "device map = {{device(type='npu', index=0): device(type='npu', index=9)}}\\ndevice count = {{'npu': 8}}",
                lambda: rpc.init_rpc("worker0", rank=0, world_size=1, backend=rpc.BackendType.NPU_TENSORPIPE,
                                     rpc_backend_options=Options(device_maps={{"worker0": {{"npu:0": "npu:9"}}}})))
        os.environ["MASTER_PORT"] = "{free_port()}"
        options = Options(device_maps={{"worker0": {{"npu:0": "npu:1"}}}}, devices=["npu:0", "npu:1"])
        rpc.init_rpc("worker0", rank=0, world_size=1, backend=rpc.BackendType.NPU_TENSORPIPE,
                     rpc_backend_options=options)
        x = torch.randn(5, device="npu")
        seen, doubled = rpc.rpc_sync("worker0", located, args=(x,))
        assert seen == "npu:1" and doubled.device == x.device and torch.equal(doubled.cpu(), x.cpu() * 2)
        rref = rpc.RRef(x)  # a local reference to a tensor: no transfer
        assert rref.to_here() is x
        rpc.shutdown()

        os.environ["MASTER_PORT"] = "{free_port()}"  # a dynamic group (no world size): the worker joins alone
        rpc.init_rpc("worker0", rank=0, backend=rpc.BackendType.NPU_TENSORPIPE,
                     rpc_backend_options=Options(device_maps={{"worker0": {{"npu:0": "npu:2"}}}}))
        seen, doubled = rpc.rpc_sync("worker0", located, args=(x,))
        assert seen == "npu:2" and doubled.device == x.device and torch.equal(doubled.cpu(), x.cpu() * 2)
        rpc.shutdown()

        os.environ["MASTER_PORT"] = "{free_port()}"
        rpc.init_rpc("worker0", rank=0, world_size=1)  # PyTorch's TENSORPIPE backend is unchanged
        refused(RuntimeError, "TensorPipe RPC backend only supports CPU tensors by default",
                lambda: rpc.rpc_sync("worker0", located, args=(x,)))
        assert rpc.rpc_sync("worker0", located, args=(x.cpu(),))[0] == "cpu"
        rpc.shutdown()
        print("ok")
    """
    assert run_python(code, timeout=120).stdout.strip().endswith("ok")


def test_device_map_checks_name_the_node_and_what_is_wrong():
    import torch

    from torch_npu.distributed.rpc.backend_registry import _tensorpipe_validate_devices, _validate_device_maps

    npu = torch.device
    counts = {"a": {"npu": 2}, "b": {"npu": 2}}
    cases = [
        (
            {"a": {"c": {npu("npu:0"): npu("npu:1")}}, "b": {}},
            {"a": [], "b": []},
            "Node a has invalid target node names",
        ),
        ({"a": {}, "b": {}}, {"a": [npu("npu:0"), npu("npu:0")], "b": []}, "Node a has duplicated devices"),
        ({"a": {}, "b": {}}, {"a": [npu("npu:2")], "b": []}, "Node a has devices with invalid indices"),
        (
            {"a": {"b": {npu("npu:0"): npu("npu:1"), npu("npu:1"): npu("npu:1")}}, "b": {}},
            {"a": [], "b": []},
            "Node a has duplicated target devices in its device map for b",
        ),
        (
            {"a": {"b": {npu("npu:1"): npu("npu:0")}}, "b": {}},
            {"a": [npu("npu:0")], "b": []},
            "Node a has unexpected source devices in its device map for b",
        ),
        (
            {"a": {"b": {npu("npu:0"): npu("npu:5")}}, "b": {}},
            {"a": [], "b": []},
            "Node a has target devices with invalid indices in its device map for b",
        ),
        (
            {"a": {"b": {npu("npu:0"): npu("npu:0")}}, "b": {}},
            {"a": [], "b": [npu("npu:1")]},
            "Node a has unexpected target devices in its device map for b",
        ),
        (
            {"a": {"b": {npu("npu:7"): npu("npu:0")}}, "b": {}},
            {"a": [], "b": []},
            "Node a has source devices with invalid indices in its device map for b",
        ),
    ]
    for maps, devices, text in cases:
        with pytest.raises(ValueError) as refused:
            _validate_device_maps(["a", "b"], counts, maps, devices)
        assert str(refused.value).startswith(text) and "ERR02003 DIST invalid value" in str(refused.value), refused
    _validate_device_maps(["a", "b"], counts, {"a": {"b": {npu("npu:0"): npu("npu:1")}}, "b": {}}, {"a": [], "b": []})
    assert _tensorpipe_validate_devices([npu("cpu"), npu("npu:1")], {"npu": 2})
    assert not _tensorpipe_validate_devices([npu("npu:2")], {"npu": 2})


def test_the_backend_refuses_a_store_or_options_of_another_kind():
    import torch.distributed as dist
    import torch.distributed.rpc as rpc

    from torch_npu.distributed.rpc.options import NPUTensorPipeRpcBackendOptions

    init = rpc.backend_registry.init_backend
    with pytest.raises(TypeError) as refused:
        init(rpc.BackendType.NPU_TENSORPIPE, "not a store", "w", 0, 1, NPUTensorPipeRpcBackendOptions())
    assert str(refused.value).startswith("`store` must be a c10d::Store. not a store"), refused.value
    assert "ERR02002 DIST invalid type" in str(refused.value), refused.value
    options = rpc.TensorPipeRpcBackendOptions()
    with pytest.raises(TypeError) as refused:
        init(rpc.BackendType.NPU_TENSORPIPE, dist.HashStore(), "w", 0, 1, options)
    assert str(refused.value).startswith(f"`rpc_backend_options` must be a `NPUTensorPipeRpcBackendOptions`. {options}")
