"""The matmul + collective operators of tensor parallelism (torch_npu's MC2 family), over the hccl process
group whose communicator name is `hcom` (``group._get_backend(torch.device("npu")).get_hccl_comm_name(rank)``).

- npu_mm_all_reduce_base: all_reduce(x1 @ x2 + bias + x3) over the group (bias and x3 join every rank's
  product, as the documented formula); x2 int8 with antiquant_scale/offset is dequantised first (per tensor,
  per channel, or per group of antiquant_group_size rows); int8 x1 and x2 with dequant_scale (and
  pertoken_scale) run as npu_quant_matmul.
- npu_all_gather_base_mm: gathers x1 (self) from every rank along dim 0, then multiplies: (gather_out @ x2 +
  bias, gather_out), gather_out empty unless gather_output.
- npu_mm_reduce_scatter_base: reduce_scatter(self @ x2 + bias) along dim 0.
On a card the computation and the communication overlap inside one kernel; here they run one after the other
with the same results. For float16 / bfloat16 inputs the card keeps the product and the reduction in float32 and
rounds once, at the end (op-plugin's golden references do the same); so does vnpu. Not supported: the
communication quantisation (comm_quant_scale_*), the quantised gather/scatter variants (x1_scale, x2_scale) and
comm_turn other than 0.
"""

import torch
import torch.distributed as dist

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []


def process_group(hcom, op):
    """The process group of this process whose hccl communicator is named `hcom`."""
    from torch.distributed import distributed_c10d

    check(dist.is_initialized(), op, f"hcom {hcom!r}: the default process group is not initialized")
    for group in list(distributed_c10d._world.pg_map):
        try:
            backend = group._get_backend(torch.device("npu"))
        except RuntimeError:
            continue
        if hasattr(backend, "get_hccl_comm_name") and backend.get_hccl_comm_name(group.rank()) == hcom:
            return group
    raise RuntimeError(f"{op}: hcom {hcom!r} names no hccl process group of this process")


def _common_checks(op, x1, x2, comm_turn, unsupported):
    check(x2.dim() == 2, op, f"x2 must be 2-D [k, n], got {x2.dim()}-D")
    check(x1.dim() in (2, 3), op, f"x1 must be 2-D or 3-D, got {x1.dim()}-D")
    check(x1.shape[-1] == x2.shape[0], op, f"k of x1 ({x1.shape[-1]}) and x2 ({x2.shape[0]}) must be equal")
    check(comm_turn == 0, op, f"comm_turn must be 0, got {comm_turn}")
    for name, given in unsupported.items():
        check(given is None, op, f"{name} is not supported by vnpu")


def _dequantised_weight(x2, scale, offset, group_size, dtype, op):
    """(x2 + offset) * scale in dtype: scale per tensor [1], per channel [n] / [1, n], or per group of rows."""
    k, n = x2.shape
    weight = x2.float()
    if group_size:
        groups = (k + group_size - 1) // group_size
        check(
            tuple(scale.shape) == (groups, n),
            op,
            f"per-group antiquant_scale must be [ceil(k / {group_size}) = {groups}, {n}], got {tuple(scale.shape)}",
        )

        def expand(p):
            return p.float().repeat_interleave(group_size, 0)[:k]
    else:
        check(scale.numel() in (1, n), op, f"antiquant_scale must hold 1 or n={n} values, got {scale.numel()}")

        def expand(p):
            return p.float().reshape(1, -1)

    if offset is not None:
        weight = weight + expand(offset)
    return (weight * expand(scale)).to(dtype)


def _product(op, x1, x2, bias, antiquant_scale, antiquant_offset, antiquant_group_size, dequant_scale, pertoken_scale):
    if dequant_scale is not None:
        check(x1.dtype == x2.dtype == torch.int8, op, "dequant_scale needs int8 x1 and x2")
        rows = x1.reshape(-1, x1.shape[-1])
        out_dtype = torch.bfloat16 if dequant_scale.dtype == torch.bfloat16 else torch.float16
        out = torch.ops.npu.npu_quant_matmul(
            rows, x2, dequant_scale, pertoken_scale=pertoken_scale, bias=bias, output_dtype=out_dtype
        )
        return out.reshape(*x1.shape[:-1], x2.shape[1])
    if antiquant_scale is not None:
        check(x2.dtype == torch.int8, op, f"antiquant_scale needs an int8 x2, got {x2.dtype}")
        x2 = _dequantised_weight(x2, antiquant_scale, antiquant_offset, antiquant_group_size, x1.dtype, op)
    check(x1.dtype == x2.dtype, op, f"x1 and x2 must have one dtype, got {x1.dtype} and {x2.dtype}")
    out = torch.matmul(_widened(x1), _widened(x2))
    return out if bias is None else out + _widened(bias)


def _widened(t):
    """float16 / bfloat16 as float32, the precision of the card's product and reduction; other dtypes as given."""
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


def _reduce(op, reduce_op):
    check(reduce_op == "sum", op, f"reduce_op must be 'sum', got {reduce_op!r}")
    return dist.ReduceOp.SUM


def _mm_all_reduce_fake(x1, x2, hcom, *, dequant_scale=None, **kwargs):
    dtype = (
        x1.dtype
        if dequant_scale is None
        else (torch.bfloat16 if dequant_scale.dtype == torch.bfloat16 else torch.float16)
    )
    return x1.new_empty(*x1.shape[:-1], x2.shape[1], dtype=dtype)


@npu_op(
    "npu_mm_all_reduce_base(Tensor x1, Tensor x2, str hcom, *, str reduce_op='sum', Tensor? bias=None, "
    "Tensor? antiquant_scale=None, Tensor? antiquant_offset=None, Tensor? x3=None, Tensor? dequant_scale=None, "
    "Tensor? pertoken_scale=None, Tensor? comm_quant_scale_1=None, Tensor? comm_quant_scale_2=None, "
    "int antiquant_group_size=0, int comm_turn=0, int[]? group_sizes=None, int? y_dtype=None, int? x1_dtype=None, "
    "int? x2_dtype=None, int? dequant_scale_dtype=None, int? pertoken_scale_dtype=None, int comm_quant_mode=0, "
    "str? comm_mode=None) -> Tensor",
    fake=_mm_all_reduce_fake,
)
def npu_mm_all_reduce_base(
    x1,
    x2,
    hcom,
    *,
    reduce_op="sum",
    bias=None,
    antiquant_scale=None,
    antiquant_offset=None,
    x3=None,
    dequant_scale=None,
    pertoken_scale=None,
    comm_quant_scale_1=None,
    comm_quant_scale_2=None,
    antiquant_group_size=0,
    comm_turn=0,
    group_sizes=None,
    y_dtype=None,
    x1_dtype=None,
    x2_dtype=None,
    dequant_scale_dtype=None,
    pertoken_scale_dtype=None,
    comm_quant_mode=0,
    comm_mode=None,
):
    op = "npu_mm_all_reduce_base"
    _common_checks(
        op, x1, x2, comm_turn, {"comm_quant_scale_1": comm_quant_scale_1, "comm_quant_scale_2": comm_quant_scale_2}
    )
    reduction = _reduce(op, reduce_op)
    group = process_group(hcom, op)
    out = _product(
        op, x1, x2, bias, antiquant_scale, antiquant_offset, antiquant_group_size, dequant_scale, pertoken_scale
    )
    if x3 is not None:
        check(x3.shape == out.shape, op, f"x3 must have the output's shape {tuple(out.shape)}, got {tuple(x3.shape)}")
        out = out + _widened(x3)
    out = out.contiguous()
    dist.all_reduce(out, op=reduction, group=group)
    return out.to(x1.dtype) if dequant_scale is None else out


def _check_world(op, group, world_size):
    check(
        world_size == group.size(),
        op,
        f"world_size={world_size} does not match the {group.size()} ranks of the group",
    )


@npu_op(
    "npu_all_gather_base_mm(Tensor self, Tensor x2, str hcom, int world_size, *, Tensor? bias=None, "
    "Tensor? x1_scale=None, Tensor? x2_scale=None, int gather_index=0, bool gather_output=True, int comm_turn=0, "
    "ScalarType? output_dtype=None, str? comm_mode=None) -> (Tensor, Tensor)",
    fake=lambda x1, x2, hcom, world_size, *, gather_output=True, **kwargs: (
        x1.new_empty(x1.shape[0] * world_size, x2.shape[1]),
        x1.new_empty(x1.shape[0] * world_size, x1.shape[1]) if gather_output else x1.new_empty(0),
    ),
)
def npu_all_gather_base_mm(
    x1,
    x2,
    hcom,
    world_size,
    *,
    bias=None,
    x1_scale=None,
    x2_scale=None,
    gather_index=0,
    gather_output=True,
    comm_turn=0,
    output_dtype=None,
    comm_mode=None,
):
    op = "npu_all_gather_base_mm"
    _common_checks(op, x1, x2, comm_turn, {"x1_scale": x1_scale, "x2_scale": x2_scale})
    check(x1.dim() == 2, op, f"self must be 2-D [m, k], got {x1.dim()}-D")
    check(gather_index == 0, op, f"gather_index must be 0 (gather self), got {gather_index}")
    group = process_group(hcom, op)
    _check_world(op, group, world_size)
    gathered = x1.new_empty(x1.shape[0] * world_size, x1.shape[1])
    dist.all_gather_into_tensor(gathered, x1.contiguous(), group=group)
    out = torch.matmul(gathered, x2)
    if bias is not None:
        out = out + bias
    return out, (gathered if gather_output else x1.new_empty(0))


@npu_op(
    "npu_mm_reduce_scatter_base(Tensor self, Tensor x2, str hcom, int world_size, *, str reduce_op='sum', "
    "Tensor? bias=None, Tensor? x1_scale=None, Tensor? x2_scale=None, int comm_turn=0, "
    "ScalarType? output_dtype=None, str? comm_mode=None) -> Tensor",
    fake=lambda x1, x2, hcom, world_size, **kwargs: x1.new_empty(x1.shape[0] // world_size, x2.shape[1]),
)
def npu_mm_reduce_scatter_base(
    x1,
    x2,
    hcom,
    world_size,
    *,
    reduce_op="sum",
    bias=None,
    x1_scale=None,
    x2_scale=None,
    comm_turn=0,
    output_dtype=None,
    comm_mode=None,
):
    op = "npu_mm_reduce_scatter_base"
    _common_checks(op, x1, x2, comm_turn, {"x1_scale": x1_scale, "x2_scale": x2_scale})
    check(x1.dim() == 2, op, f"self must be 2-D [m, k], got {x1.dim()}-D")
    reduction = _reduce(op, reduce_op)
    group = process_group(hcom, op)
    _check_world(op, group, world_size)
    check(x1.shape[0] % world_size == 0, op, f"m={x1.shape[0]} must be divisible by world_size={world_size}")
    product = torch.matmul(_widened(x1), _widened(x2))
    if bias is not None:
        product = product + _widened(bias)
    out = product.new_empty(x1.shape[0] // world_size, x2.shape[1])
    dist.reduce_scatter_tensor(out, product.contiguous(), op=reduction, group=group)
    return out.to(x1.dtype)
