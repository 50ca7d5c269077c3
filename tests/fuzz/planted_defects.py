"""Operators with planted defects on npu, for testing that the fuzzer finds, minimises and survives them."""

import os
import time

from vnpu.fuzz.catalogue import BY_NAME, Op


def _on_npu(defect):
    def run(ts, p):
        if ts[0].device.type == "npu":
            return defect(ts[0])
        return ts[0] + 0

    return run


SILENT_GARBAGE = [BY_NAME["abs"], BY_NAME["neg"], Op("planted_off_by_one", 1, _on_npu(lambda t: t + 1))]
CRASH = [BY_NAME["abs"], Op("planted_crash", 1, _on_npu(lambda t: os.abort()))]
HANG = [BY_NAME["abs"], Op("planted_hang", 1, _on_npu(lambda t: time.sleep(3600)))]
