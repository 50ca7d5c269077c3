"""torch.npu's module-level API beyond devices and memory: legacy types, SoC facts, runtime
controls, mstx, deterministic and autocast helpers, overflow flags, reliability APIs."""

import pytest
import torch
from error_cases import raises_exactly, t
from subprocess_helpers import last_line, run_python

import torch_npu


def test_every_public_name_resolves_on_torch_npu_and_torch_npu_npu():
    assert torch.npu is torch_npu.npu
    missing = [name for name in torch.npu.__all__ if not hasattr(torch.npu, name)]
    assert missing == []


@pytest.mark.parametrize(
    "name,dtype",
    [
        ("FloatTensor", torch.float32),
        ("HalfTensor", torch.float16),
        ("BFloat16Tensor", torch.bfloat16),
        ("LongTensor", torch.int64),
        ("BoolTensor", torch.bool),
        ("ByteTensor", torch.uint8),
    ],
)
def test_legacy_tensor_types_create_and_check_npu_tensors(name, dtype):
    cls = getattr(torch.npu, name)
    empty = cls(2, 3)
    assert empty.shape == (2, 3) and empty.dtype == dtype and empty.device.type == "npu"
    data = cls([1, 0, 1])
    assert torch.equal(data.cpu(), torch.tensor([1, 0, 1], dtype=dtype))
    assert isinstance(data, cls)
    assert not isinstance(data.cpu(), cls)
    other = torch.int16 if dtype != torch.int16 else torch.float32
    assert not isinstance(data.to(other), cls)


def test_legacy_typed_storages_live_on_npu():
    storage = torch.npu.FloatStorage(4)
    assert storage.device.type == "npu" and storage.dtype == torch.float32 and len(storage) == 4
    assert isinstance(storage, torch.npu.FloatStorage)
    assert torch.npu.HalfStorage.dtype == torch.float16
    with pytest.raises(RuntimeError, match="Not available for NPU storage"):
        torch.npu.FloatStorage.from_buffer(b"1234")


def test_tensor_type_strings_round_trip():
    t = torch.ones(2, device="npu")
    assert t.type() == "torch.npu.FloatTensor"
    assert t.type("torch.npu.HalfTensor").dtype == torch.float16


def test_soc_facts_follow_the_profile():
    assert torch.npu.get_soc_version() == 220
    out = last_line(
        run_python(
            "import torch, torch_npu; print(torch.npu.get_soc_version(), " "torch.npu.is_bf16_supported())",
            env={"VNPU_SOC": "Ascend910A"},
        )
    )
    assert out.split()[1] == "False"
    assert int(out.split()[0]) < 220


def test_amp_supported_dtypes_and_bf16():
    assert torch.npu.get_amp_supported_dtype() == [torch.float16, torch.bfloat16, torch.float32]
    assert torch.npu.is_bf16_supported() is True


def test_utilization_and_blas_handle():
    assert torch.npu.utilization() == 0
    with pytest.raises(Exception, match="[Ii]nvalid device|out of range|device"):
        torch.npu.utilization(99)
    with pytest.warns(UserWarning, match="NPU does not use blas handle."):
        assert torch.npu.current_blas_handle() is None


def test_cann_version_says_it_is_vnpu():
    assert torch.npu.utils.get_cann_version().endswith("+vnpu")
    assert torch_npu.utils.get_cann_version("CANN").endswith("+vnpu")
    with pytest.raises(ValueError):
        torch.npu.utils.get_cann_version("NOT_A_MODULE")


def test_sync_debug_mode_warns_and_errors_on_host_syncs():
    x = torch.randn(4, device="npu")
    torch.npu.set_sync_debug_mode("warn")
    try:
        assert torch.npu.get_sync_debug_mode() == 1
        with pytest.warns(UserWarning, match="synchroniz"):
            x.sum().item()
        torch.npu.set_sync_debug_mode(2)
        with pytest.raises(RuntimeError, match="synchroniz"):
            x.cpu()
    finally:
        torch.npu.set_sync_debug_mode("default")
    assert torch.npu.get_sync_debug_mode() == 0
    x.cpu()
    with pytest.raises(RuntimeError, match="invalid value of debug_mode"):
        torch.npu.set_sync_debug_mode("loud")


def test_stop_and_restart_device():
    x = torch.ones(3, device="npu:1")
    assert torch.npu.stop_device(1) == 0
    try:
        with pytest.raises(RuntimeError, match="stop"):
            x + 1
    finally:
        torch.npu.restart_device(1)
    assert torch.equal((x + 1).cpu(), torch.full((3,), 2.0))


def test_reliability_queries():
    assert torch.npu.stress_detect() == 0
    with pytest.raises(ValueError):
        torch.npu.stress_detect("gpu")
    assert torch.npu.check_uce_in_memory(0) == 0
    torch.npu.set_op_timeout_ms(1000)
    with pytest.raises(OverflowError):
        torch.npu.set_op_timeout_ms(-5)


def test_mstx_marks_and_ranges_are_recorded():
    mstx = torch.npu.mstx
    before = len(mstx.records())
    rid = mstx.range_start("forward", domain="train")
    mstx.mark("checkpoint")
    mstx.range_end(rid)
    assert mstx.range_push("outer") == 0
    assert mstx.range_push("inner") == 1
    assert mstx.range_pop() == 1
    assert mstx.range_pop() == 0
    assert mstx.range_pop() == -1

    @mstx.annotate("decorated")
    def work():
        return 7

    assert work() == 7
    new = mstx.records()[before:]
    assert [r["message"] for r in new] == ["checkpoint", "forward", "inner", "outer", "decorated"]
    assert new[1]["domain"] == "train" and new[1]["end_ns"] >= new[1]["start_ns"]
    mstx.range_end(rid)  # already closed: nothing to end, as on the card
    assert len(mstx.records()) == before + 5


MSTX_REFUSALS = [
    (lambda m: m.mark(3), "Invalid message for mstx.mark func. Please input valid message string."),
    (lambda m: m.mark(""), "Invalid message for mstx.mark func. Please input valid message string."),
    (lambda m: m.mark("x", domain=1), "Invalid domain for mstx.mark func. Please input valid domain string."),
    (lambda m: m.mark("x", stream=1), "Invalid stream for mstx.mark func. Please input valid stream."),
    (lambda m: m.range_start(""), "Invalid message for mstx.range_start func. Please input valid message string."),
    (
        lambda m: m.range_start("x", domain=""),
        "Invalid domain for mstx.range_start func. Please input valid domain string.",
    ),
    (lambda m: m.range_start("x", stream=1), "Invalid stream for mstx.range_start func. Please input valid stream."),
    (
        lambda m: m.range_end("id"),
        "Invalid message for mstx.range_end func. Please input return value from mstx.range_start.",
    ),
    (
        lambda m: m.range_end(1, domain=None),
        "Invalid domain for mstx.range_end func. Please input valid domain string.",
    ),
]


@pytest.mark.parametrize("call,message", MSTX_REFUSALS, ids=[m for _, m in MSTX_REFUSALS])
def test_mstx_refuses_bad_arguments_with_torch_npus_warning_and_never_raises(call, message):
    before = len(torch.npu.mstx.records())
    with pytest.warns(UserWarning) as caught:
        result = call(torch.npu.mstx)
    assert [str(w.message) for w in caught] == [message]
    assert result in (None, 0) and len(torch.npu.mstx.records()) == before


def test_mstx_hands_valid_calls_to_the_native_layer(monkeypatch):
    calls = []
    native = torch_npu._C._mstx
    for name in ("_mark", "_mark_on_host", "_range_start", "_range_start_on_host", "_range_end"):
        monkeypatch.setattr(native, name, lambda *args, name=name: calls.append((name, *args)) or 7, raising=False)
    stream = torch.npu.current_stream()
    torch.npu.mstx.mark("m")
    torch.npu.mstx.mark("s", stream=stream, domain="d")
    assert torch.npu.mstx.range_start("r") == 7
    assert torch.npu.mstx.range_start("rs", stream, domain="d") == 7
    torch.npu.mstx.range_end(7, domain="d")
    assert calls == [
        ("_mark_on_host", "m", "default"),
        ("_mark", "s", stream.npu_stream, "d"),
        ("_range_start_on_host", "r", "default"),
        ("_range_start", "rs", stream.npu_stream, "d"),
        ("_range_end", 7, "d"),
    ]


def test_mstx_logs_a_failure_instead_of_raising(monkeypatch, capsys):
    def broken(message, domain):
        raise RuntimeError("recorder unavailable")

    monkeypatch.setattr(torch_npu._C._mstx, "_mark_on_host", broken, raising=False)
    assert torch.npu.mstx.mark("m") is None
    assert capsys.readouterr().out.strip().endswith("-[ERROR] Call mark failed. Exception: recorder unavailable")


def test_mstx_ranges_appear_in_torch_profiler_traces():
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with torch.npu.mstx.mstx_range("my_region"):
            torch.ones(2, device="npu") + 1
    assert any(e.key == "my_region" for e in prof.key_averages())


def test_deterministic_level_drives_torch_switch():
    try:
        with pytest.warns(UserWarning):
            torch.npu.set_deterministic_level(1)
        assert torch.are_deterministic_algorithms_enabled()
        torch.npu.set_deterministic_level(0)
        assert not torch.are_deterministic_algorithms_enabled()
        with pytest.raises(ValueError):
            torch.npu.set_deterministic_level(5)
    finally:
        torch.use_deterministic_algorithms(False)


def test_deterministic_level_warns_as_torch_npu_and_follows_torch_switch():
    try:
        torch.use_deterministic_algorithms(False)
        with pytest.warns(UserWarning) as record:
            torch.npu.set_deterministic_level(2)
        assert [str(w.message) for w in record] == [
            "After using 'torch_npu.npu.set_deterministic_level', please do not use "
            "'torch.use_deterministic_algorithms' anymore, as it may cause unknown errors.",
            "The current configuration value of 'torch_npu.npu.set_deterministic_level' conflicts with "
            "'torch.use_deterministic_algorithms'. 'torch.use_deterministic_algorithms' has been configured to 'True'",
        ]
        assert torch.npu._get_deterministic_level() == 2
        torch.use_deterministic_algorithms(False)
        with pytest.warns(UserWarning):
            assert torch.npu._get_deterministic_level() == 0
        torch.use_deterministic_algorithms(True)
        with pytest.warns(UserWarning):
            assert torch.npu._get_deterministic_level() == 1
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(False)
        with pytest.warns(UserWarning):
            torch.npu.set_deterministic_level(0)


def test_deterministic_with_backward_switches_in_backward():
    try:
        x = torch.randn(3, device="npu", requires_grad=True)
        y = torch.npu.enable_deterministic_with_backward(x * 2)
        assert torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(False)
        y.sum().backward()
        assert torch.are_deterministic_algorithms_enabled()
        z = torch.npu.disable_deterministic_with_backward(x * 3)
        assert not torch.are_deterministic_algorithms_enabled()
        z.sum().backward()
        assert not torch.are_deterministic_algorithms_enabled()
        assert torch.equal(x.grad.cpu(), torch.full((3,), 5.0))
    finally:
        torch.use_deterministic_algorithms(False)


def test_autocast_utils_reflect_torch_state():
    assert torch.npu.is_autocast_enabled() is False
    with torch.autocast("npu", dtype=torch.bfloat16):
        assert torch.npu.is_autocast_enabled() is True
        assert torch.npu.get_autocast_dtype() == torch.bfloat16
    torch.npu.set_autocast_dtype(torch.float16)
    assert torch.npu.get_autocast_dtype() == torch.float16
    with pytest.raises(ValueError):
        torch.npu.set_autocast_dtype(torch.float64)


def test_overflow_flag_apis_refused_on_inf_nan_socs():
    assert torch.npu.utils.is_support_inf_nan() is True
    with pytest.raises(RuntimeError, match="Unsupport api when soc_version >= Ascend910B1"):
        torch.npu.get_npu_overflow_flag()
    assert torch.npu.utils.npu_check_overflow(torch.tensor([1.0, float("inf")], device="npu")) is True
    assert torch.npu.utils.npu_check_overflow(1.5) is False


def test_overflow_flag_on_saturation_mode_soc():
    out = run_python(
        """
        import torch, torch_npu
        torch.npu.clear_npu_overflow_flag()
        a = torch.tensor([60000.0], device="npu", dtype=torch.float16)
        print(torch.npu.get_npu_overflow_flag())
        b = a * 4
        print(torch.npu.get_npu_overflow_flag())
        torch.npu.clear_npu_overflow_flag()
        print(torch.npu.get_npu_overflow_flag(), torch.npu.utils.is_support_inf_nan())
    """,
        env={"VNPU_SOC": "Ascend910A"},
    )
    assert out.stdout.split() == ["False", "True", "False", "False"]


def test_obfuscation_reports_missing_service():
    with pytest.raises(RuntimeError, match="507018|PMCC"):
        torch.npu.obfuscation_initialize(128, 0, 1)


def test_aclnn_allow_hf32_is_the_conv_switch():
    import torch_npu.npu.aclnn as aclnn

    out = run_python("""
        import torch, torch_npu
        aclnn = torch_npu.npu.aclnn
        print(aclnn.allow_hf32, torch.npu.conv.allow_hf32)
        aclnn.allow_hf32 = False
        print(aclnn.allow_hf32, torch.npu.conv.allow_hf32)
    """)
    assert out.stdout.split() == ["True", "True", "False", "False"]
    with pytest.warns(UserWarning, match="no aclnn library"):
        assert aclnn.version() is None


def test_torch_npu_top_level_exports():
    for name in ("npu", "Format", "npu_format_cast", "get_npu_format", "empty_with_format"):
        assert hasattr(torch_npu, name)
    with pytest.raises(AttributeError):
        _ = torch_npu.not_a_name


def test_subpackages_are_reachable_after_import_torch_npu():
    out = run_python("""
        import torch_npu
        print(torch_npu.optim.NpuFusedAdam.__name__, torch_npu.contrib.amp.initialize.__name__,
              torch_npu.utils.collect_env.get_env_info.__name__, torch_npu.testing.__name__,
              hasattr(torch_npu, "profiler_that_does_not_exist"))
    """)
    assert out.stdout.split() == ["NpuFusedAdam", "initialize", "get_env_info", "torch_npu.testing", "False"]


# Bad input: the exact first line of the error (torch_npu's "[ERROR] ... ERRxxyyy" suffix follows it)
MODULE_API_ERRORS = [
    (
        lambda: torch.npu.obfuscation_initialize(0, 0, 1),
        ValueError,
        "hidden_size must be in [1, 10000] when cmd is 1, but got 0",
    ),
    (
        lambda: torch.npu.obfuscation_initialize(8, 0, 1, obf_coefficient=2.0),
        ValueError,
        "obf_coefficient must be in (0.0, 1.0], but got 2.0",
    ),
    (
        lambda: torch.npu.obfuscation_initialize(8, 0, 1, data_type=torch.int64),
        TypeError,
        "data_type must be float16, float32, bfloat16 or int8, but got torch.int64",
    ),
    (
        lambda: torch.npu.obfuscation_calculate(1, t(2), None),
        RuntimeError,
        "obfuscation_calculate: the PMCC model-obfuscation engine is not deployed on this machine (ACL error 507018); "
        "vnpu provides no PMCC service",
    ),
    (
        lambda: torch.npu.obfuscation_finalize(1),
        RuntimeError,
        "obfuscation_finalize: the PMCC model-obfuscation engine is not deployed on this machine (ACL error 507018); "
        "vnpu provides no PMCC service",
    ),
    (lambda: torch.npu.utils.npu_check_overflow("inf"), RuntimeError, "Unsupport type."),
    (lambda: torch.npu.FloatStorage.from_buffer(b"1234"), RuntimeError, "from_buffer: Not available for NPU storage"),
    (lambda: torch_npu.not_an_api, AttributeError, "module 'torch_npu' has no attribute 'not_an_api'"),
    (lambda: torch_npu.npu.not_an_api, AttributeError, "module 'torch_npu.npu' has no attribute 'not_an_api'"),
    (lambda: torch_npu.nn.Conv9d, AttributeError, "module 'torch_npu.nn' has no attribute 'Conv9d'"),
]


@pytest.mark.parametrize("call,kind,message", MODULE_API_ERRORS, ids=[c[2][:48] for c in MODULE_API_ERRORS])
def test_module_api_error_message(call, kind, message):
    raises_exactly(call, kind, message)


def test_every_public_torch_npu_function_of_ours_has_type_hints():
    import inspect

    unannotated = []
    for name in torch_npu.npu.__all__:
        fn = getattr(torch_npu.npu, name)
        if not (inspect.isfunction(fn) and fn.__module__.startswith("torch_npu")):
            continue
        sig = inspect.signature(fn)
        params = [p for p in sig.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if sig.return_annotation is inspect.Signature.empty or any(p.annotation is p.empty for p in params):
            unannotated.append(name)
    assert unannotated == []


def test_torch_npus_raw_stream_weak_ref_and_host_cache_names():
    from torch_npu import _C

    assert _C._npu_getCurrentRawStream(0) == torch.npu.current_stream(0).npu_stream
    side = torch.npu.Stream()
    with torch.npu.stream(side):
        assert _C._npu_getCurrentRawStreamNoWait(0) == side.npu_stream != torch.npu.default_stream(0).npu_stream
    x = torch.arange(6.0, device="npu")
    weak = _C._weak_ref_tensor(x)
    assert weak.data_ptr() == x.data_ptr() and weak.stride() == x.stride()
    x.add_(1)
    assert torch.equal(weak.cpu(), torch.arange(1.0, 7.0))
    # a view keeps its offset and strides over the whole storage, and the storage's private format reads through
    base = torch.arange(3072.0, device="npu")
    view = base.as_strided((2, 1, 8, 64), (1536, 0, 192, 1), 128)
    weak_view = _C._weak_ref_tensor(view)
    assert (weak_view.storage_offset(), weak_view.stride()) == (128, (1536, 0, 192, 1))
    assert weak_view.untyped_storage().nbytes() == base.untyped_storage().nbytes() and torch.equal(weak_view, view)
    torch.npu.config.allow_internal_format = True
    try:
        nz = torch_npu.npu_format_cast(torch.ones(16, 16, device="npu"), 29)
        assert torch_npu.get_npu_format(_C._weak_ref_tensor(nz)) == 29
    finally:
        torch.npu.config.allow_internal_format = False
    pinned = torch.ones(4).pin_memory()
    del pinned
    _C._npu_hostEmptyCache()
    assert torch.npu.host_memory_stats()["reserved_bytes.current"] == 0


def test_change_data_ptr_and_erase_stream():
    dst, src = torch.zeros(2, device="npu"), torch.arange(10.0, device="npu")
    assert torch_npu.npu_change_data_ptr(dst, src, 3) == 0
    assert torch.equal(dst.cpu(), torch.tensor([3.0, 4.0]))
    src.mul_(2)  # dst reads src's memory
    assert torch.equal(dst.cpu(), torch.tensor([6.0, 8.0]))
    with pytest.raises(RuntimeError, match="dst needs 2 elements but src has 1"):
        torch_npu.npu_change_data_ptr(torch.zeros(2, device="npu"), src, 9)
    t, stream = torch.ones(2, device="npu"), torch.npu.Stream()
    t.record_stream(stream)
    assert torch_npu.erase_stream(t, stream) is None
    with pytest.raises(TypeError, match="expects an npu tensor"):
        torch_npu.erase_stream(torch.ones(2), stream)


def test_every_public_npu_operator_is_a_torch_npu_name_listed_in_all():
    packets = [
        name
        for name in dir(torch.ops.npu)
        if not name.startswith("_") and isinstance(getattr(torch.ops.npu, name, None), torch._ops.OpOverloadPacket)
    ]
    assert len(packets) > 60
    for name in packets:
        exported, packet = getattr(torch_npu, name), getattr(torch.ops.npu, name)
        assert (
            isinstance(exported, torch._ops.OpOverloadPacket)
            and exported._qualified_op_name == packet._qualified_op_name
        )
        assert name in torch_npu.__all__, name


def test_operators_taking_self_accept_it_as_input_like_torch_npus_bindings():
    x = torch.randn(4, device="npu")
    assert torch.equal(torch_npu.fast_gelu(input=x).cpu(), torch_npu.fast_gelu(x).cpu())
    y = torch.randn(2, 4, device="npu")
    assert torch.equal(torch_npu.npu_swiglu(input=y, dim=-1).cpu(), torch_npu.npu_swiglu(y).cpu())
    compiled = torch.compile(lambda t: torch_npu.fast_gelu(input=t) * 2, fullgraph=True)
    assert torch.equal(compiled(x).cpu(), (torch_npu.fast_gelu(x) * 2).cpu())


def test_lazy_top_level_names_are_listed_but_loaded_on_first_use():
    out = run_python("""
        import torch_npu
        from torch_npu.utils.exposed_api import public_npu_functions
        before = "matmul_checksum" in torch_npu.__dict__
        listed = "matmul_checksum" in torch_npu.__all__ and "matmul_checksum" in dir(torch_npu)
        value = torch_npu.matmul_checksum
        print(before, listed, callable(value), "npu_rms_norm" in public_npu_functions, "fast_gelu" in public_npu_functions)
    """)
    assert out.stdout.strip().splitlines()[-1] == "False True True True True"


def test_memory_helpers_refuse_bad_input_with_exact_messages():
    from error_cases import first_line

    from torch_npu import _C

    with pytest.raises(RuntimeError) as info:
        _C._weak_ref_tensor(torch.ones(2))
    assert first_line(info.value) == "_weak_ref_tensor expects an npu tensor, got one on cpu"
    src = torch.arange(4.0, device="npu")
    with pytest.raises(RuntimeError) as info:
        torch_npu.npu_change_data_ptr(torch.zeros(2, dtype=torch.int32, device="npu"), src, 0)
    assert first_line(info.value) == "npu_change_data_ptr: dst is Int but src is Float"
    with pytest.raises(RuntimeError) as info:
        torch_npu.npu_change_data_ptr(torch.zeros(2, device="npu"), src, -1)
    assert first_line(info.value) == "npu_change_data_ptr: index must be non-negative, got -1"
    with pytest.raises(RuntimeError) as info:
        torch_npu.npu_change_data_ptr(torch.zeros(2, device="npu"), src, 3)
    assert first_line(info.value) == "npu_change_data_ptr: dst needs 2 elements but src has 1 from index 3"
    t = torch.ones(2, device="npu:0")
    with pytest.raises(RuntimeError) as info:
        torch_npu.erase_stream(t, torch.npu.Stream(device=1))
    assert first_line(info.value) == "erase_stream: the stream is on npu:1 but the tensor is on npu:0"
