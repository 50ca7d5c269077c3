"""The operator tables of README.md and README.zh.md, generated from the operator registry: every operator of
the `npu` namespace (`torch.ops.npu.<name>`, exported as `torch_npu.<name>`), grouped by the family of the module
that defines it, with the ones that have a backward and the card-only ones. Written between the READMEs' markers.

    python docs/operator_tables.py          # after adding or removing an operator (`make docs`)

Each module of torch_npu/ops that defines an operator belongs to exactly one family below (a test fails when a
new module is missing here); the layouts / dtypes notes are the only hand-written part of the tables.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readme_sections import replace_section  # noqa: E402

START, END = "<!-- operator-tables:start -->", "<!-- operator-tables:end -->"
HEADERS = {
    "README.md": ("family", "operators", "layouts / dtypes", "autograd"),
    "README.zh.md": ("类别", "算子", "布局 / 数据类型", "反向"),
}
ALL = {"README.md": "all", "README.zh.md": "全部"}
NONE = "—"


class Family:
    def __init__(self, en, zh, modules, notes=("", "")):
        self.titles = {"README.md": en, "README.zh.md": zh}
        self.notes = {"README.md": notes[0], "README.zh.md": notes[1]}
        self.modules = modules


FP = ("fp32/fp16/bf16", "fp32/fp16/bf16")
FAMILIES = (
    Family(
        "attention",
        "注意力",
        (
            "fusion_attention fusion_attention_v2 fusion_attention_v3 attention_infer attention_infer_v2 "
            "attention_update attention_softmax block_sparse_attention fused_attention_score "
            "fused_attention_layernorm_qkv fused_floyd_attention multi_head_attention multi_head_attention_backward "
            "masked_softmax_rel_pos sparse_attention sparse_attention_grads kv_quant_sparse_attention "
            "lightning_indexer_loss nsa_compress nsa_compress_attention nsa_select_attention nsa_attention_infer "
            "quant_fusion_attention mla_prolog"
        ),
        (
            "BSH, SBH, BSND, BNSD, TND (varlen, paged), BNSD_BSND; sparse_mode 0-8; GQA; pse; int8 KV caches; "
            "fp32/fp16/bf16",
            "BSH、SBH、BSND、BNSD、TND（变长、分页）、BNSD_BSND；sparse_mode 0-8；GQA；pse；int8 KV 缓存；"
            "fp32/fp16/bf16",
        ),
    ),
    Family(
        "KV cache, RoPE",
        "KV 缓存、旋转位置编码",
        "rope kv_cache kv_cache_gather kv_rmsnorm_rope_cache qkv_rms_norm_rope_cache rope_quant_kvcache "
        "scatter_list advance_step",
        (
            "half/interleave (apply_rotary_pos_emb also quarter); BSND (or BSH), SBND, BNSD, TND; Norm / PA / PA_NZ caches",
            "half/interleave（apply_rotary_pos_emb 另有 quarter）；BSND（或 BSH）、SBND、BNSD、TND；Norm / PA / PA_NZ 缓存",
        ),
    ),
    Family(
        "norms",
        "归一化",
        "norms norm_backward norm_quant norm_mx_quant rms_norm_quant_v2 add_rms_norm_inplace",
        ("fp32/fp16/bf16, statistics in fp32", "fp32/fp16/bf16，统计量用 fp32"),
    ),
    Family(
        "activations, softmax, dropout",
        "激活、softmax、dropout",
        "activations activation_backward dropout_masks byte_mask_dropout",
        FP,
    ),
    Family(
        "matmul, FFN, hyper-connections",
        "矩阵乘、FFN、超连接",
        "batch_gather_matmul fused_matmul transpose_batchmatmul grouped_matmul_add ffn mhc_pre mhc_post mhc_sinkhorn",
        FP,
    ),
    Family(
        "quantisation",
        "量化",
        (
            "quant dynamic_quant dual_level_quant mx_quant mx_quant_two_axes group_quant grouped_dynamic_quant "
            "kronecker_quant rotate_quant gelu_quant swiglu_quant swiglu_group_quant swiglu_mx_quant "
            "dequant_swiglu_quant dequant_bias add_quant_matmul quant_matmul_dequant quant_matmul_gelu "
            "quant_matmul_reduce_sum quant_max quant_param quant_scatter quant_conv2d transpose_quant_batchmatmul "
            "weight_quant_preprocess ifmr"
        ),
        (
            "int8 with exact integer accumulation; int4 packed in int32; per token / per tensor / per group; MX "
            "(FP8 / FP4 with E8M0 scales)",
            "int8 整数累加精确；int4 打包进 int32；按 token / 整张量 / 分组；MX（FP8 / FP4，E8M0 缩放）",
        ),
    ),
    Family(
        "MoE",
        "MoE",
        (
            "moe moe_gating_backward moe_init_routing_v2 moe_init_routing_quant moe_re_routing moe_routing_map "
            "moe_token_permute_grad moe_update_expert grouped_matmul_finalize_routing grouped_matmul_swiglu_quant"
        ),
        FP,
    ),
    Family(
        "communication-fused (hccl)",
        "通算融合（hccl）",
        (
            "matmul_collectives quant_matmul_collectives all_to_all_matmul quant_all_to_all_matmul alltoallv_gmm "
            "quant_alltoallv_gmm moe_distribute moe_distribute_phases distribute_barrier"
        ),
        (
            "real collectives on the group named by `hcom` / `group_ep`; results equal the unfused sequence; MoE dispatch / combine also with shared-expert ranks (`shared_expert_rank_num`, the card's split of each rank's tokens) and the two-rank TP domain (`group_tp`: rows all-gathered in dispatch, reduce-scattered in combine), the v2 family with `x_active_mask` (padding tokens or single routes left out) the zero / copy / const special experts (computed on the token's rank, never sent) and elastic scaling (`elastic_info`: the live ranks exchange point to point, a dropped rank never calls); every combine with `comm_quant_mode` 2 sends the expert rows as int8 with one scale per 8 elements, as the card's kernel does (not with the TP domain, not in the setup / teardown operators)",
            "在 `hcom` / `group_ep` 指定的通信域上做真实集合通信；结果与不融合的算子序列一致；MoE dispatch / combine 也支持共享专家卡（`shared_expert_rank_num`，按卡上的方式切分各卡 token）和两卡 TP 域（`group_tp`：dispatch 中 allgather，combine 中 reduce-scatter），v2 系列支持 `x_active_mask`（不参与通信的填充 token 或单个路由）、零专家 / 拷贝专家 / 常量专家（在 token 所在的卡上计算，不发送）以及动态缩容（`elastic_info`：存活的卡之间点对点交换，被剔除的卡不调用）；各 combine 在 `comm_quant_mode` 为 2 时按卡上 kernel 的方式以 int8 发送专家输出行（每 8 个元素一个缩放系数；TP 域与 setup / teardown 算子不支持）",
        ),
    ),
    Family(
        "recurrent, linear attention, causal conv1d",
        "循环层、线性注意力、因果 conv1d",
        "rnn_layers rnn_backward rnn_stacks chunk_gated_delta_rule recurrent_gated_delta_rule fused_causal_conv1d "
        "masked_causal_conv1d",
        (
            "one layer, one direction per call; batch_first; state pools",
            "每次调用一层、一个方向；batch_first；状态池",
        ),
    ),
    Family("convolution", "卷积", "convolutions convolution_backward deformable_conv2d", FP),
    Family(
        "reductions, slicing, losses",
        "归约、切片、损失",
        "reduction_slicing index_backward losses loss_backward vocab_parallel_cross_entropy",
        FP,
    ),
    Family(
        "CV",
        "CV",
        "boxes boxes_backward rotated_boxes rotated_box_coding ps_roi_pooling roi_align_backward proposal_sampling "
        "image_preprocessing",
        (
            "xyxy / xywh, aligned or cross, IoU or IoF; rotated boxes in degrees",
            "xyxy / xywh，逐对或交叉，IoU 或 IoF；旋转框（角度制）",
        ),
    ),
    Family(
        "optimizers, sampling",
        "优化器、采样",
        "optimizer_ops bert_adam sampling top_k_top_p_sample",
        FP,
    ),
    Family(
        "tensors, formats, memory, checks",
        "张量、格式、内存、检测",
        "tensor_ops tensor_backward copies format_cast swapped_memory float_status silent_check hans_codec "
        "spectral_backward named_grads internal_operators graph_debug",
        ("ND, NZ, NC1HWC0 and the other private formats", "ND、NZ、NC1HWC0 等私有格式"),
    ),
    Family(
        "card-only (raise ERR00007 saying what the card does)",
        "仅限真卡（抛出 ERR00007，说明真卡做什么）",
        "card_only",
    ),
)


def _family_of_module():
    owner = {}
    for family in FAMILIES:
        for module in family.modules.split():
            if module in owner:
                raise SystemExit(
                    f"module {module} is in two families: {owner[module].titles['README.md']} and "
                    f"{family.titles['README.md']}"
                )
            owner[module] = family
    return owner


def _differentiable(name):
    """Whether the operator has a backward: an autograd kernel, or a composite kernel autograd sees through."""
    import torch

    packet = getattr(torch.ops.npu, name)
    for overload in packet.overloads():
        qualname = f"npu::{name}" + ("" if overload == "default" else f".{overload}")
        for key in ("Autograd", "CompositeImplicitAutograd"):
            if torch._C._dispatch_has_kernel_for_dispatch_key(qualname, key):
                return True
    return False


def collect():
    """{family: [(operator, differentiable), ...]} in definition order, and the modules no family claims."""
    import torch_npu  # noqa: F401  (defines the operators)
    from torch_npu.ops._library import DEFINED_IN

    owner = _family_of_module()
    grouped = {family: [] for family in FAMILIES}
    unclaimed = set()
    for name, module in DEFINED_IN.items():
        short = module.rsplit(".", 1)[-1]
        if short not in owner:
            unclaimed.add(module)
            continue
        grouped[owner[short]].append((name, _differentiable(name)))
    return grouped, unclaimed


def _names(ops):
    return ", ".join(f"`{name}`" for name, _ in ops)


def table(grouped, readme):
    lines = ["| " + " | ".join(HEADERS[readme]) + " |", "|" + "---|" * len(HEADERS[readme])]
    for family, ops in grouped.items():
        if not ops:
            continue
        with_backward = [op for op in ops if op[1]]
        autograd = ALL[readme] if len(with_backward) == len(ops) else (_names(with_backward) or NONE)
        cells = (family.titles[readme], _names(ops), family.notes[readme] or NONE, autograd)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(grouped, readme):
    total = sum(len(ops) for ops in grouped.values())
    card_only = len(grouped[FAMILIES[-1]])
    differentiable = sum(d for ops in grouped.values() for _, d in ops)
    if readme == "README.zh.md":
        return (
            f"注册表中 `npu` 命名空间共 {total} 个算子：{total - card_only} 个已实现，{card_only} 个仅限真卡；"
            f"{differentiable} 个有反向。"
        )
    return (
        f"The registry's `npu` namespace: {total} operators, {total - card_only} computed, {card_only} card-only; "
        f"{differentiable} with a backward."
    )


def render(grouped, readme):
    return f"{summary(grouped, readme)}\n\n{table(grouped, readme)}"


def write_readme(path, text):
    """Replaces the text between the README's markers; refuses a README without them."""
    replace_section(path, START, END, text, "operator tables")


def main():
    grouped, unclaimed = collect()
    if unclaimed:
        raise SystemExit(f"modules that define operators but belong to no family in {__file__}: {sorted(unclaimed)}")
    for readme in HEADERS:
        write_readme(os.path.join(ROOT, readme), render(grouped, readme))
    print(summary(grouped, "README.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
