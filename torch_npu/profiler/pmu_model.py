"""The AI Core PMU columns of kernel_details.csv (Level1 and Level2), per aic_metrics choice, with the
column names an Atlas A2 (separate cube "aic" and vector "aiv" cores) writes.

vnpu has no hardware counters, so the values are vnpu's model, never random: a kernel's duration is
split between the pipes that would do its work, in proportion to the roofline times of roofline.py
(cube work: FLOPs / peak throughput; data movement: bytes read and written / HBM bandwidth; vector
work: output elements / vector throughput, taken as an eighth of the cube's). Cube operators (Accelerator
Core AI_CORE) fill the aic_* columns, vector operators the aiv_* ones, and AI CPU kernels show N/A.
Byte columns are the bytes the kernel reads and writes; cycles are time x the AI Core frequency of
info.json; cache hit rates and bank conflicts, which the model does not have, are 0.
"""

from torch_npu.profiler.roofline import ITEM_SIZE, _flops, _numel

__all__ = ["AIC_FREQUENCY_MHZ", "pmu_header", "pmu_values"]

AIC_FREQUENCY_MHZ = 1800

_AIC_TIME = ["aicore_time(us)", "aic_total_cycles"]
_AIV_TIME = ["aiv_time(us)", "aiv_total_cycles"]
# aic_metrics value -> (aic columns after the time ones, aiv columns after the time ones)
COLUMNS = {
    "ACL_AICORE_PIPE_UTILIZATION": (
        [
            "aic_mac_time(us)",
            "aic_mac_ratio",
            "aic_scalar_time(us)",
            "aic_scalar_ratio",
            "aic_mte1_time(us)",
            "aic_mte1_ratio",
            "aic_mte2_time(us)",
            "aic_mte2_ratio",
            "aic_fixpipe_time(us)",
            "aic_fixpipe_ratio",
            "aic_icache_miss_rate",
        ],
        [
            "aiv_vec_time(us)",
            "aiv_vec_ratio",
            "aiv_scalar_time(us)",
            "aiv_scalar_ratio",
            "aiv_mte2_time(us)",
            "aiv_mte2_ratio",
            "aiv_mte3_time(us)",
            "aiv_mte3_ratio",
            "aiv_icache_miss_rate",
            "cube_utilization(%)",
        ],
    ),
    "ACL_AICORE_ARITHMETIC_UTILIZATION": (
        ["aic_mac_fp16_ratio", "aic_mac_int8_ratio", "aic_cube_fops"],
        ["aiv_vec_fp32_ratio", "aiv_vec_fp16_ratio", "aiv_vec_int32_ratio", "aiv_vec_misc_ratio", "aiv_vec_fops"],
    ),
    "ACL_AICORE_MEMORY_BANDWIDTH": (
        [
            "aic_read_main_memory_datas(KB)",
            "aic_write_main_memory_datas(KB)",
            "aic_GM_to_L1_datas(KB)",
            "aic_L0C_to_L1_datas(KB)",
            "aic_L0C_to_GM_datas(KB)",
            "aic_GM_to_UB_datas(KB)",
            "aic_UB_to_GM_datas(KB)",
        ],
        [
            "aiv_read_main_memory_datas(KB)",
            "aiv_write_main_memory_datas(KB)",
            "aiv_GM_to_UB_datas(KB)",
            "aiv_UB_to_GM_datas(KB)",
        ],
    ),
    "ACL_AICORE_L0B_AND_WIDTH": (
        [
            "aic_scalar_ld_ratio",
            "aic_scalar_st_ratio",
            "aic_l0a_read_bw(GB/s)",
            "aic_l0a_write_bw(GB/s)",
            "aic_l0b_read_bw(GB/s)",
            "aic_l0b_write_bw(GB/s)",
            "aic_l0c_read_bw(GB/s)",
            "aic_l0c_write_bw(GB/s)",
        ],
        ["aiv_scalar_ld_ratio", "aiv_scalar_st_ratio"],
    ),
    "ACL_AICORE_MEMORY_UB": (
        ["aic_ub_read_bw_mte(GB/s)", "aic_ub_write_bw_mte(GB/s)"],
        [
            "aiv_ub_read_bw_vector(GB/s)",
            "aiv_ub_write_bw_vector(GB/s)",
            "aiv_ub_read_bw_scalar(GB/s)",
            "aiv_ub_write_bw_scalar(GB/s)",
        ],
    ),
    "ACL_AICORE_RESOURCE_CONFLICT_RATIO": (
        ["aic_vec_bankgroup_cflt_ratio", "aic_vec_bank_cflt_ratio", "aic_vec_resc_cflt_ratio"],
        ["aiv_vec_bankgroup_cflt_ratio", "aiv_vec_bank_cflt_ratio", "aiv_vec_resc_cflt_ratio"],
    ),
    "ACL_AICORE_L2_CACHE": (
        [
            "aic_write_cache_hit",
            "aic_write_cache_miss_allocate",
            "aic_r0_read_cache_hit",
            "aic_r0_read_cache_miss_allocate",
        ],
        [
            "aiv_write_cache_hit",
            "aiv_write_cache_miss_allocate",
            "aiv_r0_read_cache_hit",
            "aiv_r0_read_cache_miss_allocate",
        ],
    ),
    "ACL_AICORE_MEMORY_ACCESS": (
        ["aic_read_main_memory_datas(KB)", "aic_write_main_memory_datas(KB)"],
        ["aiv_read_main_memory_datas(KB)", "aiv_write_main_memory_datas(KB)"],
    ),
}


def pmu_header(aic_metrics):
    """The PMU columns for an aic_metrics value; none for ACL_AICORE_NONE."""
    if aic_metrics not in COLUMNS:
        return []
    aic, aiv = COLUMNS[aic_metrics]
    return _AIC_TIME + aic + _AIV_TIME + aiv


def _work(op, inputs, outputs, tflops, hbm_gbps):
    """(compute us, read us, write us, bytes read, bytes written, flops) of one kernel under the model."""
    ins = [list(t[0]) for t in inputs]
    outs = [list(t[0]) for t in outputs]
    read = sum(_numel(s) * ITEM_SIZE.get(str(t[1]).lower(), 4) for s, t in zip(ins, inputs))
    written = sum(_numel(s) * ITEM_SIZE.get(str(t[1]).lower(), 4) for s, t in zip(outs, outputs))
    flops = _flops(op, ins, outs)
    if flops:
        compute = flops / (tflops * 1e6)
    else:
        compute = sum(_numel(s) for s in outs) / (tflops * 1e6 / 8)
    return compute, read / (hbm_gbps * 1e3), written / (hbm_gbps * 1e3), read, written, flops


def _ratios(parts):
    total = sum(parts)
    return [p / total for p in parts] if total > 0 else [1.0] + [0.0] * (len(parts) - 1)


def pmu_values(aic_metrics, core, op, duration_us, inputs, outputs, tflops, hbm_gbps):
    """The PMU column values of one kernel (see the module docstring)."""
    header = pmu_header(aic_metrics)
    if not header:
        return []
    if core == "AI_CPU":
        return ["N/A"] * len(header)
    compute, read_us, write_us, read, written, flops = _work(op, inputs, outputs, tflops, hbm_gbps)
    cube = core == "AI_CORE"
    aic, aiv = COLUMNS[aic_metrics]
    cycles = round(duration_us * AIC_FREQUENCY_MHZ)
    if aic_metrics == "ACL_AICORE_PIPE_UTILIZATION":
        mac, mte2, fixpipe = _ratios([compute, read_us, write_us])
        vec, vmte2, vmte3 = _ratios([compute, read_us, write_us])
        aic_part = [mac, 0.0, 0.0, mte2, fixpipe]
        aiv_part = [vec, 0.0, vmte2, vmte3]
        aic_cols = [v for r in aic_part for v in (round(r * duration_us, 3), round(r, 3))] + [0.0]
        aiv_cols = [v for r in aiv_part for v in (round(r * duration_us, 3), round(r, 3))] + [0.0]
        utilization = round(100.0 * mac, 3)
        if cube:
            return [duration_us, cycles] + aic_cols + [0, 0] + [0.0] * (len(aiv) - 1) + [utilization]
        return [0, 0] + [0.0] * len(aic) + [duration_us, cycles] + aiv_cols + [0.0]
    kb_read, kb_written = round(read / 1024.0, 3), round(written / 1024.0, 3)
    if aic_metrics == "ACL_AICORE_ARITHMETIC_UTILIZATION":
        aic_cols = [1.0, 0.0, float(flops)]
        aiv_cols = [1.0, 0.0, 0.0, 0.0, float(flops)]
    elif aic_metrics in ("ACL_AICORE_MEMORY_BANDWIDTH", "ACL_AICORE_MEMORY_ACCESS"):
        aic_cols = [kb_read, kb_written] + [kb_read, 0.0, kb_written, 0.0, 0.0][: len(aic) - 2]
        aiv_cols = [kb_read, kb_written] + [kb_read, kb_written][: len(aiv) - 2]
    elif aic_metrics in ("ACL_AICORE_L0B_AND_WIDTH", "ACL_AICORE_MEMORY_UB"):
        read_bw = round(read / duration_us / 1e3, 3) if duration_us > 0 else 0.0
        write_bw = round(written / duration_us / 1e3, 3) if duration_us > 0 else 0.0
        aic_cols = ([0.0, 0.0] if len(aic) > 2 else []) + [read_bw, write_bw] * (
            (len(aic) - 2) // 2 if len(aic) > 2 else 1
        )
        aiv_cols = [read_bw, write_bw] * (len(aiv) // 2)
    else:  # conflicts and cache hits: not in the model
        aic_cols, aiv_cols = [0.0] * len(aic), [0.0] * len(aiv)
    if cube:
        return [duration_us, cycles] + aic_cols + [0, 0] + [0.0] * len(aiv)
    return [0, 0] + [0.0] * len(aic) + [duration_us, cycles] + aiv_cols
