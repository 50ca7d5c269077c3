"""torch_npu._C's runtime entry points under torch_npu's names (_npu_getDevice, _npu_emptyCache,
_npu_get_soc_version, ...): programs and libraries written for torch_npu call them; each answers as the
torch.npu function built on it does."""

import pytest
import torch

import torch_npu

C = torch_npu._C


@pytest.fixture
def device_one():
    yield
    torch.npu.set_device(0)


def test_devices(device_one):
    C._npu_init()
    assert C._npu_getDeviceCount() == torch.npu.device_count()
    C._npu_setDevice(1)
    assert C._npu_getDevice() == torch.npu.current_device() == 1
    assert C._npu_getLocalDevice() == C._npu_getDeviceWithoutSet() == 1
    assert C._npu_maybeExchangeDevice(-1) == -1
    assert C._npu_maybeExchangeDevice(0) == 1 and torch.npu.current_device() == 0
    assert C._npu_canDeviceAccessPeer(0, 1) is torch.npu.can_device_access_peer(0, 1)
    assert C._npu_getDeviceUtilizationRate(0) == torch.npu.utilization(0)
    with pytest.raises(AssertionError, match="^Invalid peer devide id"):
        C._npu_canDeviceAccessPeer(0, -1)


def test_soc_and_capabilities():
    assert C._npu_get_soc_version() == torch_npu.npu.get_soc_version()
    assert C._npu_is_bf16_supported() is torch.npu.is_bf16_supported()
    assert C._npu_is_support_inf_nan() is torch_npu.npu.utils.is_support_inf_nan()
    assert C._npu_is_jit_compile_false() is torch_npu.npu.is_jit_compile_false()
    assert C._get_cann_version("CANN") == torch_npu.npu.utils.get_cann_version("CANN")
    assert C._is_gte_cann_version("8.0.0", "CANN") is True and C._is_gte_cann_version("99.0.0", "CANN") is False
    assert C._npu_getAllocatorBackend() == "native"


def test_streams():
    s = torch.npu.Stream()
    before = torch.npu.current_stream()
    assert C._npu_getCurrentStream(0) == (before.stream_id, before.device_index, before.device_type)
    default = torch.npu.default_stream(0)
    assert C._npu_getDefaultStream(0) == (default.stream_id, default.device_index, default.device_type)
    C._npu_setStream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)
    try:
        assert torch.npu.current_stream() == s
    finally:
        torch.npu.set_stream(before)
    assert C._npu_isCurrentStreamCapturing() is False


def test_memory():
    x = torch.ones(1 << 16, device="npu")
    stats = C._npu_memoryStats(0)
    assert stats == torch.npu.memory_stats_as_nested_dict(0)
    assert stats["allocated_bytes"]["all"]["current"] >= x.numel() * 4
    C._npu_resetPeakMemoryStats(0)
    assert torch.npu.max_memory_allocated(0) == torch.npu.memory_allocated(0)
    del x
    big = torch.empty(16 << 20, dtype=torch.uint8, device="npu")  # a segment of its own
    del big
    reserved = torch.npu.memory_reserved(0)
    C._npu_emptyCache()
    assert reserved - torch.npu.memory_reserved(0) >= 16 << 20
    snapshot = C._npu_memorySnapshot()
    assert set(snapshot) >= {"segments", "device_traces"}


def test_sync_debug_mode():
    C._npu_set_sync_debug_mode(1)
    try:
        assert C._npu_get_sync_debug_mode() == torch.npu.get_sync_debug_mode() == 1
    finally:
        C._npu_set_sync_debug_mode(0)
    assert torch.npu.get_sync_debug_mode() == 0


def test_deterministic_level():
    before = torch.are_deterministic_algorithms_enabled()
    with pytest.warns(UserWarning):
        C._npu_set_deterministic_level(1)
    try:
        assert C._npu_get_deterministic_level() == 1 and torch.are_deterministic_algorithms_enabled()
    finally:
        with pytest.warns(UserWarning):
            C._npu_set_deterministic_level(0)
        torch.use_deterministic_algorithms(before)


def test_reliability_and_housekeeping():
    assert C._npu_stress_detect() == torch_npu.npu.stress_detect()
    assert C._npu_check_uce_in_memory(0) == 0 and C._npu_get_uce_addr() == []  # vnpu memory has no UCE
    C._npu_ipc_collect()
    C._npu_set_op_timeout_ms(1000)
    with pytest.raises(Exception) as ours:
        C._npu_set_op_timeout_ms(-1)
    with pytest.raises(Exception) as theirs:
        torch_npu.npu.set_op_timeout_ms(-1)
    assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)


@pytest.fixture
def core_limits():
    from torch_npu.npu import npu_config

    saved = dict(npu_config._device_limits), dict(npu_config._stream_limits)
    yield
    for live, kept in zip((npu_config._device_limits, npu_config._stream_limits), saved):
        live.clear()
        live.update(kept)


def test_device_res_limits(core_limits):
    # type 0 is cube cores, 1 vector cores (aclrtDevResLimitType); one kind per call
    default = torch.npu.get_device_limit(0)
    assert C._npu_get_device_res_limit(0, 0) == default["cube_core_num"]
    assert C._npu_get_device_res_limit(0, 1) == default["vector_core_num"]
    C._npu_set_device_res_limit(0, 0, 4)
    assert torch.npu.get_device_limit(0) == {"cube_core_num": 4, "vector_core_num": default["vector_core_num"]}
    C._npu_set_device_res_limit(0, 1, 6)
    assert (C._npu_get_device_res_limit(0, 0), C._npu_get_device_res_limit(0, 1)) == (4, 6)
    C._npu_reset_device_res_limit(0)
    assert torch.npu.get_device_limit(0) == default


def test_stream_res_limits(core_limits):
    s = torch.npu.Stream()
    parts = {"stream_id": s.stream_id, "device_index": s.device_index, "device_type": s.device_type}
    C._npu_set_stream_res_limit(**parts, type=1, value=3)
    assert torch.npu.get_stream_limit(s)["vector_core_num"] == 3 == C._npu_get_stream_res_limit(**parts, type=1)
    assert C._npu_get_stream_res_limit(**parts, type=0) == torch.npu.get_device_limit(0)["cube_core_num"]
    C._npu_reset_stream_res_limit(**parts)
    assert torch.npu.get_stream_limit(s) == torch.npu.get_device_limit(0)


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((0, 2, 1), ValueError, "resource limit type must be 0 (cube cores) or 1 (vector cores), but got 2"),
        ((0, 0, 0), ValueError, "cube_num must be in [1, {cube_core_num}], but got 0"),
        ((0, 1, 49), ValueError, "vector_num must be in [1, {vector_core_num}], but got 49"),
        (("0", 0, 1), TypeError, "device must be an int, but got <class 'str'>"),
    ],
)
def test_device_res_limit_refused(core_limits, args, error, message):
    before = torch.npu.get_device_limit(0)
    with pytest.raises(error) as raised:
        C._npu_set_device_res_limit(*args)
    assert str(raised.value).splitlines()[0] == message.format(**before)
    assert torch.npu.get_device_limit(0) == before


def test_raw_alloc_is_pool_memory():
    torch.npu.synchronize()
    before = torch.npu.memory_allocated(0)
    ptr = C._npu_npuCachingAllocator_raw_alloc(1 << 20, C._npu_getCurrentRawStream(0))
    assert ptr != 0 and torch.npu.memory_allocated(0) - before >= 1 << 20
    assert ptr in {
        b["address"] for seg in torch.npu.memory_snapshot() for b in seg["blocks"] if b["state"] == "active_allocated"
    }
    C._npu_npuCachingAllocator_raw_delete(ptr)
    assert torch.npu.memory_allocated(0) == before
    assert C._npu_npuCachingAllocator_raw_alloc(0, 0) == 0


def test_overflow_flag():
    # a fresh interpreter: watching for the flag observes every operator from then on
    from subprocess_helpers import run_python

    proc = run_python("""
        import torch, torch_npu
        C = torch_npu._C
        C._enable_overflow_npu()
        C._clear_overflow_npu()
        flags = [C._check_overflow_npu()]
        torch.tensor([3e38], device="npu") * 10
        flags += [C._check_overflow_npu(), torch_npu.npu._overflow.float_status()]
        C._clear_overflow_npu()
        flags.append(C._check_overflow_npu())
        print(flags)
    """)
    assert proc.stdout.splitlines()[-1] == "[False, True, True, False]"


def test_thread_affinity(monkeypatch):
    import os

    monkeypatch.setenv("CPU_AFFINITY_CONF", "1")
    initial = os.sched_getaffinity(0)
    core = min(initial)
    try:
        C._npu_set_thread_affinity(core, core)
        assert os.sched_getaffinity(0) == {core}
        C._npu_set_thread_affinity(-1, -1)  # the other threads' binding: the process's cores
        assert os.sched_getaffinity(0) == initial
        C._npu_set_thread_affinity(core, core)
        C._npu_reset_thread_affinity()
        assert os.sched_getaffinity(0) == initial
    finally:
        os.sched_setaffinity(0, initial)


def test_out_of_memory_observer():
    # observers stay attached for the life of the process: a fresh interpreter keeps this worker's OOMs plain
    from subprocess_helpers import run_python

    proc = run_python("""
        import json, torch, torch_npu

        import os, pickle, tempfile

        calls = []
        dump = os.path.join(tempfile.mkdtemp(), "oom.pickle")

        def observer(device, alloc, device_total, device_free):
            # what memory profilers do here (the allocator must not be locked): dump the history
            torch.npu.memory._dump_snapshot(dump)
            with open(dump, "rb") as f:
                snapshot = pickle.load(f)
            actions = [e["action"] for e in snapshot["device_traces"][device]]
            calls.append([device, alloc, device_total, device_free, torch.npu.memory_reserved(device),
                          len(snapshot["segments"]), actions[-1]])

        torch.npu.memory._record_memory_history(max_entries=1000)
        torch_npu._C._npu_attach_out_of_memory_observer(observer)
        keep = torch.empty(1 << 20, device="npu")
        assert calls == []
        try:
            torch.empty(1 << 45, dtype=torch.uint8, device="npu")
        except torch.OutOfMemoryError as e:
            message = str(e).splitlines()[0]

        def failing(*args):
            raise ValueError("observer failed")

        torch_npu._C._npu_attach_out_of_memory_observer(failing)
        try:
            torch.empty(1 << 45, dtype=torch.uint8, device="npu")
        except ValueError as e:
            replaced = str(e)
        capacity = torch.npu.get_device_properties(0).total_memory
        print(json.dumps([calls, message, replaced, capacity, torch.npu.memory_stats()["num_ooms"]]))
    """)
    import json

    calls, message, replaced, capacity, ooms = json.loads(proc.stdout.splitlines()[-1])
    (device, alloc, total, free, reserved, segments, last_action), second = calls
    assert (device, alloc, total) == (0, 1 << 45, capacity)
    assert free == total - reserved and segments >= 1 and last_action == "oom"
    assert second[:3] == [0, 1 << 45, capacity]
    assert message.startswith("NPU out of memory. Tried to allocate 32768.00 GiB (NPU 0; ")
    assert replaced == "observer failed" and ooms == 2


def test_static_kernel_reselection_has_no_package_to_select():
    # vnpu installs no static-kernel packages: reselection succeeds and changes no operator's result
    x = torch.randn(8, 8, device="npu")
    before = (x @ x).cpu()
    assert C._aclnn_reselect_static_kernel() is None and torch_npu.npu._aclnn_reselect_static_kernel() is None
    assert torch.equal((x @ x).cpu(), before)
