"""torch_npu's documented environment variables: validated at import, and either honoured by vnpu
or accepted with a one-time note of what they do on Ascend hardware.

An invalid value raises ValueError naming the variable and the values it accepts.
"""

import os
import re

from torch_npu._logging import get_logger
from torch_npu.utils._error_code import ErrCode, pta_error
from torch_npu.utils._warnings import npu_warn_once


def _choice(*values):
    return lambda v: v in values, "one of " + ", ".join(values)


def _int_range(lo, hi=None):
    def check(v):
        return re.fullmatch(r"\d+", v) is not None and int(v) >= lo and (hi is None or int(v) <= hi)

    return check, f"an integer >= {lo}" if hi is None else f"an integer in [{lo}, {hi}]"


_ANY = (lambda v: True, "any value")
_int_pair = (lambda v: re.fullmatch(r"\d+,\d+", v) is not None, "'<int>,<int>'")
_FLAG = _choice("0", "1")

# name -> (validator, what vnpu does: "honoured: ..." or a note of the hardware behaviour)
VARIABLES = {
    "ASCEND_RT_VISIBLE_DEVICES": (_ANY, "honoured: selects the visible virtual NPUs"),
    "PYTORCH_NPU_ALLOC_CONF": (_ANY, "honoured: configures vnpu's caching allocator"),
    "PYTORCH_NO_NPU_MEMORY_CACHING": (_ANY, "honoured: 1 disables the allocator cache (validated by the allocator)"),
    "STREAMS_PER_DEVICE": (_ANY, "honoured: size of the stream pool (8 or 32)"),
    "TORCH_NPU_WARNING_DISABLE": (_ANY, "honoured: silences torch_npu warnings when 1"),
    "TORCH_NPU_DISABLED_WARNING": (_ANY, "honoured (deprecated name of TORCH_NPU_WARNING_DISABLE)"),
    "TORCH_NPU_COMPACT_ERROR_OUTPUT": (_FLAG, "honoured: drops the error-code suffix details"),
    "INF_NAN_MODE_ENABLE": (_FLAG, "honoured: 0 (with INF_NAN_MODE_FORCE_DISABLE=1) selects saturation mode"),
    "INF_NAN_MODE_FORCE_DISABLE": (_FLAG, "honoured: forces saturation mode on Atlas A2/A3"),
    "TORCH_NPU_USE_COMPATIBLE_IMPL": (_FLAG, "honoured: the default of torch.npu.are_compatible_impl_enabled()"),
    "TORCH_NPU_DEVICE_CAPABILITY": (
        _ANY,
        'honoured: the value torch.npu.get_device_capability() returns ("major.minor"; otherwise it warns, None)',
    ),
    "TORCH_NPUGRAPH_GC": (_FLAG, "honoured: runs the garbage collector before NPU graph capture"),
    "CPU_AFFINITY_CONF": (
        ((lambda v: v.split(",")[0].strip() in ("0", "1", "2")), "'<mode 0|1|2>[,...]'"),
        "honoured: modes 1 and 2 let torch_npu.utils.set_thread_affinity bind threads",
    ),
    "TORCH_NPU_LOGS": (_ANY, "honoured: module logging"),
    "TORCH_NPU_LOGS_FILTER": (_ANY, "honoured: keyword filter of module logging"),
    "ASCEND_LAUNCH_BLOCKING": (
        _FLAG,
        "honoured: vnpu runs every operator synchronously anyway; a Level1/2 profile shows the stream "
        "synchronisation torch_npu makes after each launch",
    ),
    "TASK_QUEUE_ENABLE": (
        _choice("0", "1", "2"),
        "honoured: 2 refuses NPU graph capture, as torch_npu does; on hardware 1 and 2 select the two-stage "
        "operator launch pipeline, vnpu launches synchronously, so only host overheads would differ",
    ),
    "PER_STREAM_QUEUE": (
        _FLAG,
        "honoured: 1 (with TASK_QUEUE_ENABLE 1 or 2) refuses the raw handle of an ExternalStream, which has "
        "no task queue of its own",
    ),
    "COMBINED_ENABLE": (_FLAG, "on hardware this fuses pairs of non-contiguous copies; vnpu copies on the host"),
    "TORCH_NPU_FALLBACK_CPU_DISABLE": (
        _FLAG,
        "honoured with an operator-support profile (vnpu ops sync): 1 turns "
        "the operators the profile's torch_npu runs through the CPU fallback "
        "into torch_npu's error",
    ),
    "TORCH_NPU_LEGACY_IMPL_LIST": (
        ((lambda v: all(p.strip() in ("", "randomness") for p in v.split(","))), "a comma list of: randomness"),
        "on hardware this selects torch_npu's legacy random-number kernels; vnpu's " "random numbers are PyTorch's",
    ),
    "TORCH_ACL_INIT_CONFIG_PATH": (_ANY, "honoured: the aclInit JSON is validated at initialisation as torch_npu does"),
    "ACL_OP_INIT_MODE": (_ANY, "honoured: 0, 1 or 2; another value warns and resets to 0"),
    "ACL_OP_COMPILER_CACHE_DIR": (_ANY, "on hardware this is the operator compile cache directory"),
    "ACL_OP_COMPILER_CACHE_MODE": (
        _choice("enable", "disable", "force"),
        "on hardware this controls the operator compile cache",
    ),
    "OOM_SNAPSHOT_ENABLE": (
        _choice("0", "1", "2"),
        "honoured: 1 records every allocator event, 2 the allocator state; an OOM first writes "
        "oom_snapshot_<pid>_<time>.pickle",
    ),
    "OOM_SNAPSHOT_PATH": (_ANY, "honoured: directory of OOM snapshots and device memory usage files"),
    "MULTI_STREAM_MEMORY_REUSE": (
        _choice("0", "1", "2", "3"),
        "on hardware this selects how record_stream delays memory reuse; vnpu streams "
        "never have pending work, so memory is reusable at once",
    ),
    "TORCH_HCCL_BLOCKING_WAIT": (_FLAG, "HCCL: wait() blocks the host until the collective finishes"),
    "HCCL_BLOCKING_WAIT": (_FLAG, "HCCL: alias of TORCH_HCCL_BLOCKING_WAIT"),
    "TORCH_HCCL_ASYNC_ERROR_HANDLING": (_choice("0", "1", "2", "3"), "HCCL: asynchronous error handling mode"),
    "HCCL_ASYNC_ERROR_HANDLING": (_choice("0", "1", "2", "3"), "HCCL: alias of TORCH_HCCL_ASYNC_ERROR_HANDLING"),
    "TORCH_HCCL_DESYNC_DEBUG": (_FLAG, "HCCL: analyses collective timeouts"),
    "HCCL_DESYNC_DEBUG": (_FLAG, "HCCL: alias of TORCH_HCCL_DESYNC_DEBUG"),
    "HCCL_EVENT_TIMEOUT": (_int_range(0), "HCCL: seconds to wait for events (0 = forever)"),
    "P2P_HCCL_BUFFSIZE": (_int_range(0), "HCCL: MB of buffer for point-to-point communicators"),
    "RANK_TABLE_FILE": (_ANY, "HCCL: rank-table JSON for communicator setup"),
    "TORCH_HCCL_ZERO_COPY": (_FLAG, "HCCL: zero-copy intra-chip collectives"),
    "ACL_DEVICE_SYNC_TIMEOUT": (_int_range(1, 2147483), "on hardware: seconds before a device sync times out"),
    "NPU_ASD_ENABLE": (_choice("0", "1", "2", "3"), "on hardware: silent data corruption detection level"),
    "NPU_ASD_UPPER_THRESH": (_int_pair, "on hardware: absolute thresholds of silent data corruption detection"),
    "NPU_ASD_SIGMA_THRESH": (_int_pair, "on hardware: relative thresholds of silent data corruption detection"),
    "NPU_ASD_CONFIG": (_ANY, "on hardware: silent data corruption detection settings"),
    "PROF_CONFIG_PATH": (_ANY, "directory of dynamic_profile's profiler_config.json"),
    "KINETO_USE_DAEMON": (_FLAG, "dynamic profiling through the msMonitor daemon"),
    "TORCH_NPU_LAZY_FUSION": (
        _choice("True", "False", "true", "false", "1", "0"),
        "on hardware: eager element-wise fusion (DVM)",
    ),
    "TORCH_TRANSFER_TO_NPU": (_FLAG, "honoured: 1 imports torch_npu.contrib.transfer_to_npu with torch_npu"),
    "TORCHINDUCTOR_NPU_BACKEND": (_choice("default", "mlir", "dvm", "ascendc"), "inductor backend on hardware"),
    "INDUCTOR_ASCEND_CHECK_ACCURACY": (_FLAG, "inductor: compare fused kernels with eager on hardware"),
    "NPU_INDUCTOR_FALLBACK_LIST": (
        _ANY,
        "honoured: inductor leaves these operators to their ATen kernels in npu graphs",
    ),
    "TORCHINDUCTOR_ENABLE_MFUSION": (_FLAG, "inductor: MFusion graph fusion on hardware"),
    "TORCHINDUCTOR_USE_AKG": (_FLAG, "inductor: the AKG backend of MLIR mode on hardware"),
}
HONOURED = {name for name, (_, what) in VARIABLES.items() if what.startswith("honoured")}


def check_environment(environ=None):
    """Validate every documented variable that is set; note once those vnpu does not act on."""
    environ = os.environ if environ is None else environ
    for name, ((valid, expected), what) in VARIABLES.items():
        value = environ.get(name)
        if value is None:
            continue
        if not valid(value):
            raise ValueError(
                f"Invalid value {value!r} of environment variable {name}: expected {expected}"
                + pta_error(ErrCode.VALUE)
            )
        if name in HONOURED:
            get_logger("env").info("%s=%s: %s", name, value, what)
            continue
        note = f"{name}={value} is accepted by vnpu with no effect: {what}."
        get_logger("env").info(note)
        npu_warn_once(("env", name), note)
