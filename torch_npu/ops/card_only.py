"""Operators that only the card can run, defined with torch_npu's schemas: calling one raises a RuntimeError that
says what the card does and why vnpu cannot (ERR00007), at run time and while tracing, never a silent result.
`vnpu ops list --custom` shows them as card-only; `CARD_ONLY` maps each name to its reason.

- Attention-FFN disaggregation (AFD): the worker schedulers poll the ScheduleContext windows that other devices
  write by RDMA, and the batching / combine / transfer operators move tokens between attention and FFN devices
  through those windows; vnpu has no remote device windows to poll or write.
- PMCC model obfuscation: the operators call the confidential-computing engine installed beside the driver
  (torch_npu.npu.obfuscation_* raise the same way); vnpu has no such engine.
- npu_matmul_compress_dequant: its weight is the lossless compression msModelSlim's weight_compression tool writes,
  in a format that tool's compressor defines and does not publish; vnpu cannot decompress it.
"""

from torch_npu.ops._library import npu_lib
from torch_npu.ops.registration import npu_op
from torch_npu.utils._error_code import ErrCode, pta_error

__all__ = ["CARD_ONLY"]

_AFD = (
    "Attention-FFN disaggregation runs on the card: it exchanges tokens through ScheduleContext windows that other "
    "devices write by RDMA, and vnpu has no remote device windows"
)
_COMPRESSED = (
    "the weight is msModelSlim weight_compression's lossless compressed stream, decompressed by the card's "
    "MatmulCompressDequant kernel; the compressed format is not published, so vnpu cannot decompress it"
)
_PMCC = "PMCC model obfuscation runs in the confidential-computing engine beside the driver, which vnpu does not have"

_SCHEMAS = {
    "ffn_worker_scheduler_": (
        "ffn_worker_scheduler_(Tensor(a!) self, *, int sync_group_size=1, int execute_mode=0) -> Tensor(a!)",
        _AFD,
    ),  # noqa: E501
    "ffn_worker_scheduler": (
        "ffn_worker_scheduler(Tensor self, *, int sync_group_size=1, int execute_mode=0) -> Tensor",
        _AFD,
    ),  # noqa: E501
    "attention_worker_scheduler_": ("attention_worker_scheduler_(Tensor(a!) self) -> Tensor(a!)", _AFD),
    "attention_worker_scheduler": ("attention_worker_scheduler(Tensor self) -> Tensor", _AFD),
    "npu_ffn_worker_batching": (
        "npu_ffn_worker_batching(Tensor schedule_context, int expert_num, int[4] max_out_shape, *, int token_dtype=0, "
        "int need_schedule=0, int layer_num=0) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
        _AFD,
    ),
    "npu_attention_worker_combine": (
        "npu_attention_worker_combine(Tensor schedule_context, Tensor expert_scales, Tensor layer_id, int hidden_size, "
        "*, int token_dtype=0, int need_schedule=0) -> (Tensor, Tensor)",
        _AFD,
    ),
    "npu_attention_to_ffn": (
        "npu_attention_to_ffn(Tensor x, Tensor session_id, Tensor micro_batch_id, Tensor layer_id, Tensor expert_ids, "
        "Tensor expert_rank_table, str group, int world_size, int[] ffn_token_info_table_shape, "
        "int[] ffn_token_data_shape, int[] attn_token_info_table_shape, int moe_expert_num, *, Tensor? scales=None, "
        "Tensor? active_mask=None, int quant_mode=0, int sync_flag=0, int ffn_start_rank_id=0) -> ()",
        _AFD,
    ),
    "npu_ffn_to_attention": (
        "npu_ffn_to_attention(Tensor x, Tensor session_ids, Tensor micro_batch_ids, Tensor token_ids, "
        "Tensor expert_offsets, Tensor actual_token_num, str group, int world_size, int[] token_info_table_shape, "
        "int[] token_data_shape, *, Tensor? attn_rank_table=None) -> ()",
        _AFD,
    ),
    "obfuscation_initialize": (
        "obfuscation_initialize(int hidden_size, int tp_rank, int cmd, *, ScalarType? data_type=None, "
        "int? model_obf_seed_id=0, int? data_obf_seed_id=0, int? thread_num=4, float? obf_coefficient=1.0) -> Tensor",
        _PMCC,
    ),
    "obfuscation_finalize": ("obfuscation_finalize(Tensor fd_to_close) -> Tensor", _PMCC),
    "npu_matmul_compress_dequant": (
        "npu_matmul_compress_dequant(Tensor x1, Tensor x2, Tensor compress_index, Tensor bias, Tensor scale, *, "
        "Tensor? offsetW=None, int? offsetX=None) -> Tensor",
        _COMPRESSED,
    ),
    "obfuscation_calculate": (
        "obfuscation_calculate(Tensor fd, Tensor x, Tensor param, *, float? obf_coefficient=1.0) -> Tensor",
        _PMCC,
    ),
}

CARD_ONLY = {name: reason for name, (_, reason) in _SCHEMAS.items()}


def _refusing(name, reason):
    def kernel(*args, **kwargs):
        raise RuntimeError(f"{name} runs only on an Ascend card: {reason}." + pta_error(ErrCode.NOT_SUPPORT))

    kernel.__name__ = name
    kernel.__doc__ = f"Card-only: {reason}."
    return kernel


for _name, (_schema, _reason) in _SCHEMAS.items():
    _kernel = _refusing(_name, _reason)
    npu_op(_schema, fake=_kernel, devices=("npu", "cpu"))(_kernel)
    if "Tensor" not in _schema.split("->")[0]:  # no tensor argument to dispatch on
        npu_lib.impl(_name, _kernel, "CompositeExplicitAutograd")
del _name, _schema, _reason, _kernel
