"""torch_npu's error suffix, warning gate, documented environment variables and module logging."""

import re

import pytest
from error_cases import first_line
from subprocess_helpers import run_python

import torch_npu
from torch_npu.utils._env import HONOURED, VARIABLES
from torch_npu.utils._error_code import ErrCode, pta_error


def test_error_suffix_format_and_compact_mode(monkeypatch):
    monkeypatch.delenv("TORCH_NPU_COMPACT_ERROR_OUTPUT", raising=False)
    text = pta_error(ErrCode.VALUE)
    assert re.fullmatch(
        r"\n\[ERROR\] \d{4}-\d\d-\d\d-\d\d:\d\d:\d\d \(PID:\d+, Device:-?\d+, RankID:-?\d+\) "
        r"ERR00003 PTA invalid value",
        text,
    )
    monkeypatch.setenv("TORCH_NPU_COMPACT_ERROR_OUTPUT", "1")
    assert pta_error(ErrCode.VALUE) == "\nERR00003 PTA invalid value"


def test_warning_gate_silences_torch_npu_warnings():
    code = """
        import warnings, torch, torch_npu
        warnings.simplefilter("always")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch_npu.npu_format_cast(torch.ones(3, device="npu"), 29)
        print(len([w for w in caught if "NZ format" in str(w.message)]))
    """
    assert run_python(code).stdout.split() == ["1"]
    assert run_python(code, env={"TORCH_NPU_WARNING_DISABLE": "1"}).stdout.split() == ["0"]
    assert run_python(code, env={"TORCH_NPU_DISABLED_WARNING": "1"}).stdout.split() == ["0"]
    assert run_python(code, env={"RANK": "3"}).stdout.split() == ["0"]


def test_the_documented_variables_are_all_known():
    documented = {
        "INF_NAN_MODE_ENABLE",
        "INF_NAN_MODE_FORCE_DISABLE",
        "COMBINED_ENABLE",
        "ASCEND_LAUNCH_BLOCKING",
        "TASK_QUEUE_ENABLE",
        "PER_STREAM_QUEUE",
        "TORCH_NPU_FALLBACK_CPU_DISABLE",
        "TORCH_NPU_USE_COMPATIBLE_IMPL",
        "TORCH_NPU_LEGACY_IMPL_LIST",
        "TORCH_ACL_INIT_CONFIG_PATH",
        "ACL_OP_COMPILER_CACHE_DIR",
        "ACL_OP_COMPILER_CACHE_MODE",
        "PYTORCH_NPU_ALLOC_CONF",
        "PYTORCH_NO_NPU_MEMORY_CACHING",
        "OOM_SNAPSHOT_ENABLE",
        "OOM_SNAPSHOT_PATH",
        "MULTI_STREAM_MEMORY_REUSE",
        "TORCH_NPUGRAPH_GC",
        "TORCH_HCCL_BLOCKING_WAIT",
        "TORCH_HCCL_ASYNC_ERROR_HANDLING",
        "TORCH_HCCL_DESYNC_DEBUG",
        "HCCL_EVENT_TIMEOUT",
        "P2P_HCCL_BUFFSIZE",
        "RANK_TABLE_FILE",
        "TORCH_HCCL_ZERO_COPY",
        "TORCH_NPU_WARNING_DISABLE",
        "TORCH_NPU_DISABLED_WARNING",
        "TORCH_NPU_COMPACT_ERROR_OUTPUT",
        "TORCH_NPU_LOGS",
        "TORCH_NPU_LOGS_FILTER",
        "ACL_DEVICE_SYNC_TIMEOUT",
        "NPU_ASD_ENABLE",
        "NPU_ASD_UPPER_THRESH",
        "NPU_ASD_SIGMA_THRESH",
        "NPU_ASD_CONFIG",
        "CPU_AFFINITY_CONF",
        "PROF_CONFIG_PATH",
        "KINETO_USE_DAEMON",
        "TORCH_NPU_LAZY_FUSION",
        "STREAMS_PER_DEVICE",
        "TORCH_NPU_DEVICE_CAPABILITY",
        "TORCH_TRANSFER_TO_NPU",
        "TORCHINDUCTOR_NPU_BACKEND",
        "INDUCTOR_ASCEND_CHECK_ACCURACY",
        "NPU_INDUCTOR_FALLBACK_LIST",
        "TORCHINDUCTOR_ENABLE_MFUSION",
        "TORCHINDUCTOR_USE_AKG",
    }
    assert documented <= set(VARIABLES)


@pytest.mark.parametrize(
    "name,value",
    [
        ("INF_NAN_MODE_ENABLE", "2"),
        ("TASK_QUEUE_ENABLE", "yes"),
        ("ACL_DEVICE_SYNC_TIMEOUT", "0"),
        ("TORCH_TRANSFER_TO_NPU", "true"),
        ("MULTI_STREAM_MEMORY_REUSE", "7"),
        ("HCCL_EVENT_TIMEOUT", "-1"),
        ("TORCH_NPU_LOGS", "memory,+gpu"),
    ],
)
def test_invalid_values_are_refused_at_import(name, value):
    proc = run_python("import torch_npu", env={name: value}, check=False)
    assert proc.returncode != 0
    assert name in proc.stderr and "ERR00003 PTA invalid value" in proc.stderr


def test_unhonoured_variables_get_one_note_and_honoured_ones_none():
    proc = run_python(
        "import torch, torch_npu; torch.ones(1, device='npu')",
        env={"COMBINED_ENABLE": "1", "ASCEND_LAUNCH_BLOCKING": "1", "HCCL_EVENT_TIMEOUT": "30"},
    )
    assert proc.stderr.count("COMBINED_ENABLE=1 is accepted by vnpu with no effect") == 1
    assert "HCCL_EVENT_TIMEOUT=30 is accepted" in proc.stderr
    assert "ASCEND_LAUNCH_BLOCKING" not in proc.stderr
    assert "ASCEND_LAUNCH_BLOCKING" in HONOURED and "COMBINED_ENABLE" not in HONOURED


def test_torch_npu_logs_dispatch_and_env():
    proc = run_python(
        "import torch, torch_npu; (torch.ones(2, device='npu') * 3).sum()",
        env={"TORCH_NPU_LOGS": "+dispatch,env", "TASK_QUEUE_ENABLE": "1"},
    )
    assert re.search(r"torch_npu\.dispatch DEBUG aten::mul\.Tensor on npu:0 took [\d.]+ us", proc.stderr)
    assert "torch_npu.env INFO TASK_QUEUE_ENABLE=1" in proc.stderr
    filtered = run_python(
        "import torch, torch_npu; (torch.ones(2, device='npu') * 3).sum()",
        env={"TORCH_NPU_LOGS": "+dispatch", "TORCH_NPU_LOGS_FILTER": "+sum"},
    )
    lines = [line for line in filtered.stderr.splitlines() if "torch_npu.dispatch" in line]
    assert lines and all("sum" in line for line in lines)
    quiet = run_python(
        "import torch, torch_npu; (torch.ones(2, device='npu') * 3).sum()", env={"TORCH_NPU_LOGS": "-all"}
    )
    assert "torch_npu.dispatch" not in quiet.stderr


def test_vnpu_extension_environment_variables():
    proc = run_python(
        """
        import torch, torch_npu
        print(torch_npu._C._precision_settings()["fp32_to_fp16"])
    """,
        env={"NPU_FORCE_FP16": "1", "NPU_COMPILE_MODE": "O2"},
    )
    assert proc.stdout.split() == ["True"]
    assert "environment variable NPU_FORCE_FP16 is a vnpu extension absent from torch_npu" in proc.stderr
    assert "environment variable NPU_COMPILE_MODE is a vnpu extension" in proc.stderr
    bad = run_python("import torch_npu", env={"NPU_FORCE_FP16": "on"}, check=False)
    assert bad.returncode != 0 and "NPU_FORCE_FP16" in bad.stderr


def test_vnpu_extension_names_warn_once_and_work():
    proc = run_python("""
        import warnings, torch, torch_npu
        warnings.simplefilter("always")
        x = torch.tensor([-1.0, 3.0, 9.0], device="npu")
        print(torch_npu.npu_relu6(x).cpu().tolist(), torch_npu.npu_relu6(x).cpu().tolist())
        from torch_npu.nn import SyncBatchNorm, FusedAttention
        print(SyncBatchNorm is torch.nn.SyncBatchNorm, isinstance(FusedAttention(8, 2), torch.nn.MultiheadAttention))
        torch.npu.config.enable_kv_cache = True
        torch.npu.config.enable_kv_cache = False
        print(torch.npu.config.enable_kv_cache)
        torch_npu.npu.precompile(["conv"])
    """)
    lines = proc.stdout.strip().splitlines()
    assert lines == ["[0.0, 3.0, 6.0] [0.0, 3.0, 6.0]", "True True", "False"]
    for name in (
        "torch_npu.npu_relu6",
        "torch_npu.nn.SyncBatchNorm",
        "torch_npu.nn.FusedAttention",
        "torch.npu.config.enable_kv_cache",
        "torch_npu.npu.precompile",
    ):
        assert proc.stderr.count(f"{name} is a vnpu extension absent from torch_npu") == 1, name


def test_exact_environment_and_utility_messages(monkeypatch, tmp_path):
    from torch_npu._logging import parse_spec
    from torch_npu.testing.testcase import TestCase
    from torch_npu.utils._env import check_environment
    from torch_npu.utils._vnpu_extensions import apply_extension_environment

    cases = [
        (
            lambda: check_environment({"TASK_QUEUE_ENABLE": "3"}),
            ValueError,
            "Invalid value '3' of environment variable TASK_QUEUE_ENABLE: expected one of 0, 1, 2",
        ),
        (
            lambda: check_environment({"HCCL_EVENT_TIMEOUT": "-5"}),
            ValueError,
            "Invalid value '-5' of environment variable HCCL_EVENT_TIMEOUT: expected an integer >= 0",
        ),
        (
            lambda: check_environment({"ACL_DEVICE_SYNC_TIMEOUT": "0"}),
            ValueError,
            "Invalid value '0' of environment variable ACL_DEVICE_SYNC_TIMEOUT: expected an integer in [1, 2147483]",
        ),
        (
            lambda: check_environment({"NPU_ASD_UPPER_THRESH": "1"}),
            ValueError,
            "Invalid value '1' of environment variable NPU_ASD_UPPER_THRESH: expected '<int>,<int>'",
        ),
        (
            lambda: apply_extension_environment({"NPU_FORCE_FP16": "yes"}),
            ValueError,
            "Invalid value 'yes' of environment variable NPU_FORCE_FP16: expected one of 0, 1",
        ),
        (
            lambda: parse_spec("memory,+gpu"),
            ValueError,
            "TORCH_NPU_LOGS: unknown module 'gpu'; known modules: memory, dispatch, dispatch_time, silent, recovery, "
            "op_plugin, shmem, env, acl, aclgraph, all",
        ),
        (lambda: TestCase("run").assertObjectIn(object(), [1]), AssertionError, "object not found in iterable"),
    ]
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    cases.append(
        (
            lambda: torch_npu.utils.collect_env.check_directory_path_readable(str(link)),
            RuntimeError,
            f"Invalid path is a soft chain: {link}",
        )
    )
    for call, kind, message in cases:
        with pytest.raises(kind) as info:
            call()
        assert first_line(info.value) == message
    monkeypatch.setenv("CPU_AFFINITY_CONF", "7")
    with pytest.raises(ValueError) as info:
        torch_npu.utils.set_thread_affinity([0, 0])
    assert first_line(info.value) == "CPU_AFFINITY_CONF mode must be 0, 1 or 2, but got '7'"
    monkeypatch.setenv("CPU_AFFINITY_CONF", "1")
    with pytest.raises(ValueError) as info:
        torch_npu.utils.set_thread_affinity([4096, 4097])
    assert first_line(info.value).startswith("None of the cores [4096, 4097] is available to this process (allowed: [")


def test_environment_reads_are_patched_always_and_logged_once_when_logs_are_on():
    program = (
        "import os, torch_npu\n"
        "import torch_npu.utils.patch_getenv as patch\n"
        "print(os.getenv is patch._patched_getenv, os.environ.get is patch._patched_environ_get)\n"
        "os.getenv('VNPU_PROBE'); os.environ.get('VNPU_PROBE'); os.getenv('VNPU_ABSENT', 'x')\n"
    )
    logged = run_python(program, env={"TORCH_NPU_LOGS": "env", "VNPU_PROBE": "42"})
    assert logged.stdout.split() == ["True", "True"]
    assert logged.stderr.count("get env VNPU_PROBE = 42") == 1 and "VNPU_ABSENT" not in logged.stderr
    quiet = run_python(program, env={"VNPU_PROBE": "42"})  # patched as torch_npu patches them, silent
    assert quiet.stdout.split() == ["True", "True"] and "get env" not in quiet.stderr
