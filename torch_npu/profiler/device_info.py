"""The CANN side of a torch_npu result directory that tools read for the device itself:
`PROF_000001_<YYYYmmddHHMMSSfff>_<ID>/device_<n>/info.json.<n>`, msprof's description of each device
(the SoC, its core counts and the AI Core frequency), for the devices the session used."""

import datetime
import json
import os

from torch_npu.profiler.pmu_model import AIC_FREQUENCY_MHZ

__all__ = ["write_device_info"]


def _info(device, soc, pid):
    return {
        "platform_version": soc["name"],
        "pid": pid,
        "DeviceInfo": [
            {
                "id": device,
                "env_type": 3,
                "ai_core_num": soc["cube_core_num"],
                "aiv_num": soc["vector_core_num"],
                "aic_frequency": str(AIC_FREQUENCY_MHZ),
                "aiv_frequency": str(AIC_FREQUENCY_MHZ),
                "hwts_frequency": "50",
                "ai_cpu_core_num": 6,
                "ctrl_cpu_core_num": 1,
                "l2_cache_size": soc["L2_cache_size"],
            }
        ],
    }


def write_device_info(path, session):
    """Writes the PROF_* directory of `path` (an `..._ascend_pt` directory); returns it."""
    from torch_npu import _C

    soc = _C._soc_profile()
    started = datetime.datetime.fromtimestamp((session["t0_ns"] + session["epoch_offset_ns"]) / 1e9)
    prof = os.path.join(path, f"PROF_000001_{started.strftime('%Y%m%d%H%M%S%f')[:-3]}_VNPU{session['pid'] % 10000:04d}")
    devices = sorted({a["device"] for a in session["activities"]} | {m[5] for m in session["memory"]}) or [0]
    for device in devices:
        folder = os.path.join(prof, f"device_{device}")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"info.json.{device}"), "w") as f:
            json.dump(_info(device, soc, session["pid"]), f, indent=1)
    return prof
