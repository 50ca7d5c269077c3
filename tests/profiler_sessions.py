"""A torch_npu profiler recording every one of `steps` steps into `out` (CPU and NPU activity, shapes recorded), as
the tests that hand vnpu's sessions to Ascend's tools record them."""

import glob
import os

import torch_npu


def recording_profiler(out, steps, config, **options):
    return torch_npu.profiler.profile(
        activities=[torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU],
        schedule=torch_npu.profiler.schedule(wait=0, warmup=0, active=steps, repeat=1),
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(str(out)),
        experimental_config=config,
        record_shapes=True,
        **options,
    )


def the_session(out):
    """The one *_ascend_pt directory a recording wrote into `out`."""
    (session,) = glob.glob(os.path.join(out, "*_ascend_pt"))
    return session
