"""Devices: count and visibility, SoC profiles, properties, current device, guards, lazy init,
fork, autoload and the second-accelerator refusal."""

import threading

import pytest
import torch
from subprocess_helpers import last_line, run_python

import torch_npu


def test_default_machine_has_eight_ascend910b1():
    assert torch.npu.is_available()
    assert torch.npu.device_count() == 8
    assert torch.accelerator.current_accelerator() == torch.device("npu")
    assert torch.npu.get_device_name() == "Ascend910B1"
    assert torch.npu.get_device_name(7) == "Ascend910B1"


def test_device_properties_fields():
    props = torch.npu.get_device_properties(0)
    assert props.name == "Ascend910B1"
    assert props.total_memory == 64 * 1024**3
    assert (props.cube_core_num, props.vector_core_num) == (24, 48)
    assert props.L2_cache_size == 192 * 1024**2
    assert props.multi_processor_count == 48
    assert len(props.uuid.bytes) == 16 and len(str(props.uuid)) == 36
    assert props.uuid != torch.npu.get_device_properties(1).uuid
    for cuda_only in (
        "major",
        "minor",
        "is_multi_gpu_board",
        "is_integrated",
        "max_threads_per_multi_processor",
        "warp_size",
        "regs_per_multiprocessor",
        "gcnArchName",
    ):
        assert getattr(props, cuda_only) is None
    assert repr(props).startswith("_NPUDeviceProperties(name='Ascend910B1', total_memory=65536MB, cube_core_num=24")


def test_invalid_device_id_for_name_and_properties():
    with pytest.raises(AssertionError, match="Invalid device id"):
        torch.npu.get_device_name(8)
    with pytest.raises(AssertionError, match="Invalid device id"):
        torch.npu.get_device_properties("npu:99")


def test_bf16_and_amp_dtypes_follow_the_soc():
    assert torch.npu.is_bf16_supported()
    assert torch.npu.get_amp_supported_dtype() == [torch.float16, torch.bfloat16, torch.float32]


@pytest.mark.parametrize(
    "soc,memory_gib,cube,vector,bf16",
    [
        ("Ascend910B4", 32, 20, 40, True),
        ("Ascend910B3", 64, 20, 40, True),
        ("Ascend910_9391", 64, 24, 48, True),
        ("Ascend910A", 32, 32, 0, False),
    ],
)
def test_vnpu_soc_selects_the_profile(soc, memory_gib, cube, vector, bf16):
    proc = run_python(
        """
        import torch, torch_npu
        p = torch.npu.get_device_properties(0)
        print(p.name, p.total_memory // 2**30, p.cube_core_num, p.vector_core_num,
              torch.npu.is_bf16_supported(), torch.npu.mem_get_info()[1] // 2**30)
    """,
        env={"VNPU_SOC": soc},
    )
    assert last_line(proc) == f"{soc} {memory_gib} {cube} {vector} {bf16} {memory_gib}"


def test_invalid_vnpu_soc_is_a_clear_error_at_first_use():
    proc = run_python(
        """
        import torch, torch_npu
        print(torch.npu.is_available(), torch.npu.device_count())   # no initialisation yet
        try:
            torch.zeros(1, device="npu")
        except ValueError as e:
            print(e)
    """,
        env={"VNPU_SOC": "Ascend999"},
    )
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == "True 8"
    assert lines[1].startswith("VNPU_SOC='Ascend999' is not a SoC vnpu can model. Choose one of: Ascend910A,")
    assert "Ascend910B1" in lines[1]


def test_vnpu_device_memory_overrides_capacity():
    proc = run_python(
        """
        import torch, torch_npu
        print(torch.npu.get_device_properties(0).total_memory, torch.npu.mem_get_info()[1])
    """,
        env={"VNPU_DEVICE_MEMORY": "2GB"},
    )
    assert last_line(proc) == f"{2 * 2**30} {2 * 2**30}"


def test_invalid_vnpu_device_memory():
    proc = run_python(
        """
        import torch, torch_npu
        try:
            torch.zeros(1, device="npu")
        except ValueError as e:
            print(e)
    """,
        env={"VNPU_DEVICE_MEMORY": "lots"},
    )
    assert last_line(proc) == (
        "VNPU_DEVICE_MEMORY='lots' is invalid: expected a positive size such as 16GB, " "512MiB or 1073741824"
    )


@pytest.mark.parametrize(
    "value,count,physical",
    [
        ("0,1", 2, [0, 1]),
        ("2,5,7", 3, [2, 5, 7]),
        ("0,1,a,3", 2, [0, 1]),  # parsing stops at the first character that is not a digit or comma
        ("0,2,9", 2, [0, 2]),  # ids beyond the physical count end the list
        ("3", 1, [3]),
    ],
)
def test_ascend_rt_visible_devices(value, count, physical):
    proc = run_python(
        """
        import torch, torch_npu
        n = torch.npu.device_count()
        print(n, [torch_npu._C._physical_device_id(i) for i in range(n)])
    """,
        env={"ASCEND_RT_VISIBLE_DEVICES": value},
    )
    assert last_line(proc) == f"{count} {physical}"


@pytest.mark.parametrize(
    "value,reason",
    [
        (
            "1,0",
            "ASCEND_RT_VISIBLE_DEVICES='1,0' is invalid: device ids must be listed in ascending order without "
            "repeats, so no NPU is visible (torch_npu behaves the same)",
        ),
        (
            "9",
            "ASCEND_RT_VISIBLE_DEVICES='9' selects no device: the machine has 8 NPUs (ids 0 to 7, "
            "VNPU_DEVICE_COUNT)",
        ),
    ],
)
def test_bad_visible_devices_leave_no_device_and_say_why(value, reason):
    proc = run_python(
        """
        import torch, torch_npu
        print(torch.npu.is_available(), torch.npu.device_count())
        try:
            torch.ones(1, device="npu")
        except RuntimeError as e:
            print(e)
    """,
        env={"ASCEND_RT_VISIBLE_DEVICES": value},
    )
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == "False 0"
    assert lines[1] == "No NPU device is available: " + reason


def test_device_count_follows_visible_devices_until_initialisation():
    proc = run_python(
        """
        import os, torch, torch_npu
        counts = [torch.npu.device_count()]
        os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "0,1"
        counts += [torch.npu.device_count(), torch_npu._C._npu_getDeviceCount()]
        torch.npu.init()
        os.environ["ASCEND_RT_VISIBLE_DEVICES"] = "0"
        counts.append(torch.npu.device_count())
        print(counts)
    """
    )
    assert last_line(proc) == "[8, 2, 2, 2]"


def test_vnpu_device_count():
    assert (
        last_line(
            run_python("import torch, torch_npu; print(torch.npu.device_count())", env={"VNPU_DEVICE_COUNT": "2"})
        )
        == "2"
    )
    proc = run_python(
        """
        import torch, torch_npu
        print(torch.npu.device_count())
        try:
            torch.npu.init()
        except RuntimeError as e:
            print(e)
    """,
        env={"VNPU_DEVICE_COUNT": "many"},
    )
    assert proc.stdout.strip().splitlines() == [
        "0",
        "No NPU device is available: VNPU_DEVICE_COUNT='many' is invalid: expected an integer from 0 to 64 "
        "(the number of virtual NPUs)",
    ]


def test_npu_99_is_a_clear_error():
    with pytest.raises(RuntimeError) as info:
        torch.ones(2, device="npu:99")
    assert str(info.value).splitlines()[0] == (
        "Invalid NPU device ordinal. Valid device ordinal ranges from 0 - 7. (npu:99 was asked for; set "
        "VNPU_DEVICE_COUNT or ASCEND_RT_VISIBLE_DEVICES to change the device count)"
    )
    with pytest.raises(RuntimeError, match=r"ranges from 0 - 7\. \(npu:8 was asked for"):
        torch.npu.set_device(8)
    with pytest.raises(RuntimeError, match=r"ranges from 0 - 7\. \(npu:12 was asked for"):
        torch.arange(3, device="npu:12")


def test_tensors_land_on_the_requested_device():
    a = torch.ones(2, device="npu:3")
    b = torch.zeros(2, device="npu")
    with torch.npu.device(5):
        c = torch.empty(1, device="npu")
        assert torch.npu.current_device() == 5
    torch.npu.set_device(2)
    d = torch.arange(3, device="npu")
    e = torch.randn(2).npu()
    torch.npu.set_device(0)
    assert [t.device.index for t in (a, b, c, d, e)] == [3, 0, 5, 2, 2]
    assert (a + 1).device.index == 3
    assert torch.arange(4.0).to("npu:1").to("npu:2").device.index == 2
    assert next(torch.nn.Linear(2, 2).npu(4).parameters()).device == torch.device("npu", 4)


def test_current_device_is_per_thread():
    torch.npu.set_device(3)
    seen = {}

    def worker():
        seen["start"] = torch.npu.current_device()
        torch.npu.set_device(6)
        seen["tensor"] = torch.empty(1, device="npu").device.index

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == {"start": 0, "tensor": 6}
    assert torch.npu.current_device() == 3


def test_device_guards_restore_the_device_even_on_error():
    torch.npu.set_device(1)
    with pytest.raises(ZeroDivisionError):
        with torch.npu.device(4):
            assert torch.npu.current_device() == 4
            raise ZeroDivisionError
    assert torch.npu.current_device() == 1
    x = torch.ones(1, device="npu:6")
    with torch.npu.device_of(x):
        assert torch.npu.current_device() == 6
    with torch.accelerator.device_index(2):
        assert torch.accelerator.current_device_index() == 2
    assert torch.npu.current_device() == 1
    torch.npu.set_device(-1)  # negative indices are ignored, as in torch.cuda
    assert torch.npu.current_device() == 1


def test_lazy_init_contract():
    proc = run_python("""
        import torch, torch_npu
        print(torch.npu.is_initialized(), torch.npu.is_available(), torch.npu.device_count(),
              torch.npu.is_initialized())
        torch.npu.manual_seed(7)                      # queued until the device initialises
        print(torch.npu.is_initialized())
        x = torch.ones(1, device="npu")
        print(torch.npu.is_initialized(), torch.npu.initial_seed(), len(torch.npu.default_generators))
    """)
    assert proc.stdout.strip().splitlines() == ["False True 8 False", "False", "True 7 8"]


def test_reinitialising_in_a_forked_child_fails_with_torch_npu_message():
    proc = run_python("""
        import os, torch, torch_npu
        x = torch.ones(2, device="npu")                # initialise in the parent
        pid = os.fork()
        if pid == 0:
            msgs = []
            for attempt in (lambda: torch.zeros(1, device="npu"), lambda: x + 1):
                try:
                    attempt()
                    msgs.append("no error")
                except RuntimeError as e:
                    msgs.append(str(e).splitlines()[0])
            print(" | ".join(msgs), flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
        print("parent still works:", (x + 1).sum().item())
    """)
    lines = proc.stdout.strip().splitlines()
    message = (
        "Cannot re-initialize NPU in forked subprocess. To use NPU with multiprocessing, you must use the "
        "'spawn' start method"
    )
    assert lines[0] == f"{message} | {message}"
    assert lines[1] == "parent still works: 4.0"


def test_import_torch_alone_loads_torch_npu():
    proc = run_python("""
        import sys, torch
        print("torch_npu" in sys.modules, torch.npu.device_count(), torch.ones(1, device="npu").device)
    """)
    assert last_line(proc) == "True 8 npu:0"


def test_autoload_honours_torch_device_backend_autoload_0():
    proc = run_python(
        """
        import sys, torch
        print("torch_npu" in sys.modules, hasattr(torch, "npu"))
    """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert last_line(proc) == "False False"


def test_a_second_accelerator_is_refused():
    proc = run_python(
        """
        import torch
        torch._C._get_accelerator = lambda *args: torch.device("cuda")   # as on a machine with a GPU
        try:
            import torch_npu
        except RuntimeError as e:
            print(e)
    """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert proc.stdout.startswith("Two accelerators cannot be used at the same time in PyTorch: npu and cuda.")
    assert "ERR00007 PTA feature not supported" in proc.stdout


def test_device_module_and_generated_methods():
    assert torch.npu is torch_npu.npu
    assert torch.ones(1).npu().is_npu
    assert torch.UntypedStorage(8).npu().is_npu
    assert torch_npu.unsupported_dtype[0] == torch.quint8


def test_peer_access():
    assert not torch.npu.can_device_access_peer(0, 0)
    assert torch.npu.can_device_access_peer(0, 1)


def test_device_capability_is_none_unless_configured():
    with pytest.warns(UserWarning):
        assert torch.npu.get_device_capability() is None
    with pytest.warns(UserWarning):  # torch_npu does not look at the device
        assert torch.npu.get_device_capability("not a device") is None
    proc = run_python(
        "import torch, torch_npu, warnings\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    print(torch.npu.get_device_capability(99), len(w))",
        env={"TORCH_NPU_DEVICE_CAPABILITY": "nine"},
    )
    assert last_line(proc) == "None 1"
    proc = run_python(
        "import torch, torch_npu; print(torch.npu.get_device_capability())", env={"TORCH_NPU_DEVICE_CAPABILITY": "9.1"}
    )
    assert last_line(proc) == "(9, 1)"


def test_a_device_has_a_context_once_used_and_backward_serves_every_used_device():
    # torch_npu's hasPrimaryContext: true for devices set, given memory or run on; the autograd engine stashes
    # the current streams of those devices only, and a leaf on any of them (even an empty one) must be among them.
    out = run_python("""
        import torch, torch_npu
        used = lambda: [i for i in range(8) if torch_npu._C._npu_hasPrimaryContext(i)]
        print(used())
        a = torch.ones(3, device="npu")
        print(used())
        torch.npu.set_device(3)
        torch.npu.set_device(0)
        empty = torch.empty(0, device="npu:5", requires_grad=True)
        moved = torch.arange(3.0).to("npu:1").requires_grad_()
        with torch.npu.device(6):
            pass
        print(used())
        (moved * 2).sum().backward()
        (empty * 2).sum().backward()
        print(moved.grad.tolist(), moved.grad.device, empty.grad.shape, empty.grad.device)
        print(torch_npu._C._npu_hasPrimaryContext(-1), torch_npu._C._npu_hasPrimaryContext(99))
    """)
    assert out.stdout.strip().splitlines() == [
        "[]",
        "[0]",
        "[0, 1, 3, 5, 6]",
        "[2.0, 2.0, 2.0] npu:1 torch.Size([0]) npu:5",
        "False False",
    ]


_ORDINAL_ERROR = r"Invalid NPU device ordinal\. Valid device ordinal ranges from 0 - 7\."
_FACTORIES = {
    "tensor": lambda d: torch.tensor([1], device=d),
    "full": lambda d: torch.full([2, 3], 2, device=d),
    "range": lambda d: torch.range(1, 3, device=d),
    "arange": lambda d: torch.arange(1, 3, device=d),
    "empty_like": lambda d: torch.empty_like(torch.tensor(1, device="npu:0"), dtype=torch.int8, device=d),
    "empty_strided": lambda d: torch.empty_strided((2, 1, 5, 4), (2, 4, 3, 7), dtype=torch.float32, device=d),
    "eye": lambda d: torch.eye(1, device=d),
    "hann_window": lambda d: torch.hann_window(5, device=d),
    "linspace": lambda d: torch.linspace(3, 10, steps=5, device=d),
    "normal": lambda d: torch.normal(mean=1.0, std=1.0, size=[5, 5], device=d),
    "ones_like": lambda d: torch.ones_like(torch.empty(2, 3), device=d),
    "randn": lambda d: torch.randn(3, device=d),
    "randperm": lambda d: torch.randperm(10, dtype=torch.float, device=d),
    "tril_indices": lambda d: torch.tril_indices(3, 3, device=d),
    "zeros": lambda d: torch.zeros((3, 3), device=d),
    "npu_dropout_gen_mask": lambda d: torch_npu.npu_dropout_gen_mask([1, 1], p=1.0, dtype=torch.float, device=d),
    "empty_with_format": lambda d: torch_npu.empty_with_format([2, 3], device=d),
    "empty_with_swapped_memory": lambda d: torch_npu.empty_with_swapped_memory([2, 3], device=d),
    "set_device": lambda d: torch.npu.set_device(d),
}


@pytest.mark.parametrize("factory", list(_FACTORIES))
def test_factories_refuse_ordinals_past_the_device_count_in_torch_npus_words(factory):
    """torch_npu's test_error_interception: the string, int and torch.device forms of npu:8..npu:10 (torch_npu's
    own factory operators take a device index as torch's do)."""
    for index in range(8, 11):
        for device in (f"npu:{index}", torch.device(f"npu:{index}"), index):
            with pytest.raises(RuntimeError, match=_ORDINAL_ERROR):
                _FACTORIES[factory](device)


@pytest.mark.parametrize("factory", ["npu_dropout_gen_mask", "empty_with_format", "empty_with_swapped_memory"])
def test_torch_npus_factories_take_a_device_index(factory):
    """device=3 is npu:3 for torch_npu's factory operators, as for torch's."""
    assert _FACTORIES[factory](3).device == torch.device("npu:3")
