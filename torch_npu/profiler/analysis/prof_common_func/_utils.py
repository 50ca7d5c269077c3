"""Whether torch_npu's profiler API may record in this process: not while the msprof command line profiles it.

msprof (`msprof --application=...`, and vnpu's `msprof` / `vnpu profile`) hands the program its configuration in
PROFILER_SAMPLECONFIG and PROFILING_MODE; the two profilers would collect the same activity, so torch_npu's
profiler API then records nothing and says why, once per process.
"""

import os

from torch_npu.profiler.analysis.prof_common_func._constant import Constant, print_warn_msg

__all__ = ["check_msprof_env"]


def check_msprof_env() -> bool:
    """True when neither msprof variable is set (the answer, and its warnings, come once per process)."""
    if getattr(check_msprof_env, "_called", False):
        return check_msprof_env._cached_result
    check_msprof_env._called = True
    static, dynamic = os.getenv(Constant.MSPROF_STATIC_ENV), os.getenv(Constant.MSPROF_DYNAMIC_ENV)
    if static:
        print_warn_msg(
            "If performance data is collected using the 'msprof' tool. torch_npu profiler api is not effective."
        )
    if dynamic:
        print_warn_msg(
            f"Environment variable '{Constant.MSPROF_DYNAMIC_ENV}' is set. torch_npu profiler api is not effective. "
            f"Please execute 'unset {Constant.MSPROF_DYNAMIC_ENV}'."
        )
    check_msprof_env._cached_result = not (static or dynamic)
    return check_msprof_env._cached_result
