"""torch_npu's option store and configuration APIs: set_option validation, compile mode, AOE,
mm/bmm format, operator dumps, core limits, compatible-impl switch."""

import json
import os

import pytest
import torch
from error_cases import raises_exactly
from subprocess_helpers import run_python

import torch_npu


def test_set_option_rejects_non_dicts_with_torch_npu_text():
    with pytest.raises(TypeError, match=r"npu option must be a dict\.[\s\S]*ERR00002 PTA invalid type"):
        torch.npu.set_option("ACL_PRECISION_MODE=must_keep_origin_dtype")


@pytest.mark.parametrize(
    "option",
    [
        {"ACL_PRECISION_MODE": "fp64"},
        {"ACL_AICORE_NUM": "0"},
        {"ACL_AICORE_NUM": "33"},
        {"ACL_OP_DEBUG_LEVEL": "9"},
        {"ACL_OP_COMPILER_CACHE_MODE": "sometimes"},
        {"MM_BMM_ND_ENABLE": "yes"},
    ],
)
def test_set_option_rejects_invalid_values(option):
    with pytest.raises(ValueError, match=f"value of {next(iter(option))} should be in[\\s\\S]*ERR00003"):
        torch.npu.set_option(option)


def test_set_option_rejects_unknown_keys_and_stores_nothing():
    with pytest.raises(RuntimeError, match=r"^invalid npu option name:ACL_PRECISON_MODE\n[\s\S]*ERR00001"):
        torch.npu.set_option({"ACL_OP_DEBUG_LEVEL": "1", "ACL_PRECISON_MODE": "allow_fp32_to_fp16"})
    assert torch_npu._C._npu_getOption("ACL_PRECISON_MODE") is None


def test_set_option_stores_values_and_warns_on_deprecated_keys():
    torch.npu.set_option({"ACL_OP_COMPILER_CACHE_MODE": "enable", "ACL_AICORE_NUM": "8"})
    assert torch_npu._C._npu_getOption("ACL_OP_COMPILER_CACHE_MODE") == b"enable"
    assert torch_npu._C._npu_getOption("ACL_AICORE_NUM") == b"8"
    with pytest.warns(UserWarning, match="deprecated"):
        torch.npu.set_option({"ACL_OP_SELECT_IMPL_MODE": "high_precision"})


def test_mm_bmm_nd_flag_via_both_apis():
    assert torch.npu.get_mm_bmm_format_nd() is True
    torch.npu.set_option({"MM_BMM_ND_ENABLE": "disable"})
    assert torch.npu.get_mm_bmm_format_nd() is False
    torch.npu.set_mm_bmm_format_nd(True)
    assert torch.npu.get_mm_bmm_format_nd() is True


def test_compile_mode_defaults_to_binary_kernels_on_a2():
    out = run_python("""
        import torch, torch_npu
        print(torch.npu.is_jit_compile_false())
        torch.npu.set_compile_mode(jit_compile=True)
        print(torch.npu.is_jit_compile_false())
    """)
    assert out.stdout.split() == ["True", "False"]
    out = run_python("import torch, torch_npu; print(torch.npu.is_jit_compile_false())", env={"VNPU_SOC": "Ascend910A"})
    assert out.stdout.split() == ["False"]


def test_set_aoe_creates_the_dump_directory(tmp_path):
    target = tmp_path / "aoe" / "dumps"
    torch.npu.set_aoe(str(target))
    assert target.is_dir()
    assert torch_npu._C._npu_getOption("autotunegraphdumppath") == str(target).encode()


def _write_dump_config(tmp_path, mode="all", ops=()):
    cfg = tmp_path / "acl.json"
    cfg.write_text(
        json.dumps(
            {
                "dump": {
                    "dump_path": str(tmp_path / "dump"),
                    "dump_mode": mode,
                    "dump_list": [{"layer": list(ops)}] if ops else [],
                }
            }
        )
    )
    return str(cfg)


def test_dump_writes_operator_inputs_and_outputs(tmp_path):
    import numpy as np

    torch.npu.set_dump(_write_dump_config(tmp_path))
    torch.npu.init_dump()
    try:
        a = torch.arange(4.0, device="npu")
        b = a * 3
    finally:
        torch.npu.finalize_dump()
    files = [os.path.join(r, f) for r, _, fs in os.walk(tmp_path / "dump") for f in fs]
    mul_out = [f for f in files if "aten::mul" in f and ".output.0.npy" in f]
    assert len(mul_out) == 1
    assert np.array_equal(np.load(mul_out[0]), b.cpu().numpy())
    index = [f for f in files if f.endswith("dump.jsonl")]
    assert index and "aten::mul" in open(index[0]).read()
    a + 1  # after finalize_dump: nothing more is written
    assert len([f for r, _, fs in os.walk(tmp_path / "dump") for f in fs]) == len(files)


def test_each_init_set_finalize_cycle_dumps_to_its_own_path(tmp_path):
    """msprobe's L2 order: init_dump, then set_dump with this step's config, then finalize_dump."""
    for step in range(3):
        (tmp_path / f"step{step}").mkdir()
        cfg = tmp_path / f"step{step}" / "kernel_config.json"
        cfg.write_text(json.dumps({"dump": {"dump_path": str(tmp_path / f"step{step}"), "dump_mode": "all"}}))
        torch.npu.init_dump()
        torch.npu.set_dump(str(cfg))
        torch.full((3,), float(step), device="npu").neg()
        torch.npu.finalize_dump()
    for step in range(3):
        outputs = [
            f for r, _, fs in os.walk(tmp_path / f"step{step}") for f in fs if "aten::neg" in f and "output" in f
        ]
        assert len(outputs) == 1, step
    before = sum(len(fs) for _, _, fs in os.walk(tmp_path))
    torch.npu.init_dump()  # finalize_dump forgot the config: nothing to dump until set_dump
    try:
        torch.ones(2, device="npu").neg()
    finally:
        torch.npu.finalize_dump()
    assert sum(len(fs) for _, _, fs in os.walk(tmp_path)) == before


def test_dump_mode_input_only(tmp_path):
    torch.npu.set_dump(_write_dump_config(tmp_path, mode="input"))
    torch.npu.init_dump()
    try:
        torch.ones(2, device="npu").neg()
    finally:
        torch.npu.finalize_dump()
    files = [f for _, _, fs in os.walk(tmp_path / "dump") for f in fs if f.endswith(".npy")]
    assert files and all(".input." in f for f in files)


def test_set_dump_needs_an_existing_file(tmp_path):
    with pytest.raises(AssertionError, match="does not exists"):
        torch.npu.set_dump(str(tmp_path / "missing.json"))


def test_device_limit_once_and_validated():
    out = run_python("""
        import torch, torch_npu
        print(torch.npu.get_device_limit(0))
        torch.npu.set_device_limit(0, cube_num=12, vector_num=24)
        print(torch.npu.get_device_limit(0))
        try:
            torch.npu.set_device_limit(0, 10, 10)
        except RuntimeError as e:
            print("again:", "only be called once" in str(e))
        try:
            torch.npu.set_device_limit(1, cube_num=100)
        except ValueError as e:
            print("range:", "cube_num" in str(e))
    """)
    lines = out.stdout.strip().splitlines()
    assert lines[0] == "{'cube_core_num': 24, 'vector_core_num': 48}"
    assert lines[1] == "{'cube_core_num': 12, 'vector_core_num': 24}"
    assert lines[2:] == ["again: True", "range: True"]


def test_stream_limits_default_to_device_and_reset():
    s = torch.npu.Stream()
    assert torch.npu.get_stream_limit(s) == torch.npu.get_device_limit(s.device_index)
    torch.npu.set_stream_limit(s, cube_num=4, vector_num=8)
    assert torch.npu.get_stream_limit(s) == {"cube_core_num": 4, "vector_core_num": 8}
    torch.npu.reset_stream_limit(s)
    assert torch.npu.get_stream_limit(s) == torch.npu.get_device_limit(s.device_index)
    with pytest.raises(ValueError):
        torch.npu.set_stream_limit(s, cube_num=0)
    with pytest.raises(TypeError):
        torch.npu.get_stream_limit("stream")


def test_compatible_impl_switch():
    out = run_python(
        """
        import torch, torch_npu
        print(torch.npu.are_compatible_impl_enabled())
        torch.npu.use_compatible_impl(False)
        print(torch.npu.are_compatible_impl_enabled())
    """,
        env={"TORCH_NPU_USE_COMPATIBLE_IMPL": "1"},
    )
    assert out.stdout.split() == ["True", "False"]
    with pytest.raises(TypeError):
        torch.npu.use_compatible_impl("yes")


def test_config_allow_internal_format_default_and_setter():
    out = run_python("""
        import torch, torch_npu
        print(torch.npu.config.allow_internal_format)
        torch.npu.config.allow_internal_format = True
        print(torch.npu.config.allow_internal_format)
    """)
    assert out.stdout.split() == ["False", "True"]


def test_dump_list_limits_the_operators(tmp_path):
    torch.npu.set_dump(_write_dump_config(tmp_path, mode="output", ops=["aten::neg"]))
    torch.npu.init_dump()
    try:
        x = torch.ones(2, device="npu")
        (x + 1).neg()
    finally:
        torch.npu.finalize_dump()
    files = [f for _, _, fs in os.walk(tmp_path / "dump") for f in fs if f.endswith(".npy")]
    assert files and all("aten::neg" in f for f in files)


def test_bad_dump_config_is_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="cannot read the dump config"):
        torch.npu.set_dump(str(bad))
    bad.write_text(json.dumps({"dump": {"dump_path": "x", "dump_mode": "weights"}}))
    with pytest.raises(ValueError, match="dump_mode"):
        torch.npu.set_dump(str(bad))


@pytest.mark.parametrize(
    "call",
    [
        lambda: torch.npu.get_device_limit(99),
        lambda: torch.npu.set_device_limit(99, 4, 4),
        lambda: torch.npu.stop_device(99),
        lambda: torch.npu.check_uce_in_memory(99),
    ],
)
def test_device_apis_refuse_devices_that_do_not_exist(call):
    with pytest.raises(
        RuntimeError,
        match=r"^Invalid NPU device ordinal\. Valid device ordinal ranges from 0 - 7\. \(npu:99 was asked for; "
        r"set VNPU_DEVICE_COUNT or ASCEND_RT_VISIBLE_DEVICES to change the device count\)",
    ):
        call()


# Bad input: the exact first line of the error (torch_npu's "[ERROR] ... ERRxxyyy" suffix follows it)
CONFIG_ERRORS = [
    (
        lambda: torch.npu.set_option({"ACL_PRECISION_MODE": "fp64"}),
        ValueError,
        "value of ACL_PRECISION_MODE should be in ['allow_fp32_to_fp16', 'must_keep_origin_dtype'] but got fp64",
    ),
    (
        lambda: torch.npu.set_option({"ACL_AICORE_NUM": 40}),
        ValueError,
        "value of ACL_AICORE_NUM should be in 1..32 but got 40",
    ),
    (lambda: torch.npu.set_device_limit(0, foo=1), TypeError, "set_device_limit(device, cube_num=-1, vector_num=-1)"),
    (
        lambda: torch.npu.set_stream_limit(torch.npu.Stream(), 0),
        ValueError,
        "cube_num must be -1 (no limit) or in [1, 24], but got 0",
    ),
    (
        lambda: torch.npu.set_device_limit(0, vector_num=49),  # refused before anything is stored
        ValueError,
        "vector_num must be -1 (no limit) or in [1, 48], but got 49",
    ),
    (lambda: torch.npu.get_stream_limit(3), TypeError, "expected a torch_npu.npu.Stream, got int"),
    (lambda: torch.npu.use_compatible_impl(1), TypeError, "is_enable must be a bool, but got <class 'int'>"),
    (
        lambda: setattr(torch.npu.matmul, "cube_math_type", 7),
        ValueError,
        "cube_math_type must be one of ['KEEP_DTYPE', 'ALLOW_FP32_DOWN_PRECISION', 'USE_FP16', 'USE_HF32', "
        "'USE_FP32_ADD'], but got 7",
    ),
    (
        lambda: torch.npu.set_aoe("/proc/vnpu_forbidden/aoe"),
        ValueError,
        "the path of '/proc/vnpu_forbidden/aoe' is invaild.",
    ),
    (
        lambda: torch.npu.set_dump("/nonexistent/acl.json"),
        AssertionError,
        "cfg_file /nonexistent/acl.json path does not exists.",
    ),
    (lambda: torch.npu.stress_detect("gpu"), ValueError, "detect_type must be 'aic' or 'hccs', but got 'gpu'"),
    (lambda: torch.npu.set_op_timeout_ms(-1), OverflowError, "can't convert negative int to unsigned"),
    (lambda: torch.npu.set_op_timeout_ms(2**32), RuntimeError, "Overflow when unpacking unsigned long"),
    (lambda: torch.npu.set_device_limit("0"), TypeError, "device must be an int, but got <class 'str'>"),
    (
        lambda: torch.npu.get_device_limit(torch.device("npu:0")),
        TypeError,
        "device must be an int, but got <class 'torch.device'>",
    ),
    (lambda: torch.npu.can_device_access_peer(-1, 0), AssertionError, "Invalid devide id"),  # torch_npu's spelling
    (lambda: torch.npu.can_device_access_peer(0, -1), AssertionError, "Invalid peer devide id"),
    (lambda: torch.npu.set_sync_debug_mode(3), RuntimeError, "invalid value of debug_mode, expected one of 0,1,2"),
    (lambda: torch.npu.set_deterministic_level(3), ValueError, "deterministic level must be 0, 1 or 2, but got 3"),
    (
        lambda: torch.npu.set_autocast_dtype(torch.float64),
        ValueError,
        "npu autocast supports [torch.float16, torch.bfloat16, torch.float32], not torch.float64",
    ),
    (
        lambda: torch.npu.set_sync_debug_mode("loud"),
        RuntimeError,
        "invalid value of debug_mode, expected one of `default`, `warn`, `error`",
    ),
    (lambda: torch.npu.utilization(9), AssertionError, "Invalid device id"),
    (lambda: torch.npu.synchronize(torch.device("cpu")), ValueError, "Expected a npu device, but got: cpu"),
]


@pytest.mark.parametrize("call,kind,message", CONFIG_ERRORS, ids=[c[2][:48] for c in CONFIG_ERRORS])
def test_config_error_message(call, kind, message):
    raises_exactly(call, kind, message)


def test_force_aclnn_op_list_is_an_option():
    assert torch.npu.set_option({"FORCE_ACLNN_OP_LIST": "index"}) is None


def test_cann_version_comparison():
    from torch_npu.npu.utils import _is_gte_cann_version

    assert _is_gte_cann_version("8.3.RC1") and _is_gte_cann_version("8.5.0")
    assert _is_gte_cann_version("8.5.RC1")  # 8.5.RC1 comes before 8.5.0
    assert not _is_gte_cann_version("9.0.0")
    with pytest.raises(ValueError, match="not a CANN version"):
        _is_gte_cann_version("eight")


def test_an_unknown_acl_op_init_mode_warns_and_resets():
    proc = run_python("import torch, torch_npu; torch.npu.set_device(0)", env={"ACL_OP_INIT_MODE": "999"})
    assert "Get env ACL_OP_INIT_MODE not in [0, 1, 2], so reset it to the default value 0." in proc.stderr
    assert (
        "ACL_OP_INIT_MODE"
        not in run_python("import torch, torch_npu; torch.npu.set_device(0)", env={"ACL_OP_INIT_MODE": "2"}).stderr
    )


@pytest.mark.parametrize(
    "content,message",
    [
        (None, "is invalid."),
        ("not a json{{{", "Failed to parse user acl json"),
        ("", "Failed to parse user acl json"),
        ('{"dump": {"dump_scene": "lite_exception"}}', "lacks 'defaultDevice'"),
        ('{"defaultDevice": "not_an_object"}', "lacks 'defaultDevice'"),
        ('{"defaultDevice": {"default_device": "1"}}', 'requires defaultDevice.default_device to be "0"'),
        ('{"dump": {"dump_scene": "lite_exception"}, "defaultDevice": {"default_device": "0"}}', None),
    ],
)
def test_the_acl_init_json_is_checked_at_set_device(tmp_path, content, message):
    path = tmp_path / "acl.json"
    if content is not None:
        path.write_text(content)
    proc = run_python(
        "import torch, torch_npu; torch.npu.set_device(0); print('ready')",
        env={"TORCH_ACL_INIT_CONFIG_PATH": str(path)},
        check=False,
    )
    if message is None:
        assert proc.returncode == 0 and proc.stdout.strip().endswith("ready"), proc.stderr
    else:
        assert proc.returncode != 0 and message in proc.stderr, proc.stderr
