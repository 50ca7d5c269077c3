"""npu_moe_init_routing_v2: routing of tokens to experts, dropless or drop/pad, unquantised or quantised.

Shapes follow op-plugin's Meta implementation, so they depend on arguments only (never on values) and
the operator traces with torch.compile / torch.export:
  expanded_x       dropless: [min(active_num, N*k) (N*k when active_num <= 0), H];
                   drop/pad: [expert_num, expert_capacity, H];
                   int8 when quant_mode is 0 (static) or 1 (dynamic), else x's dtype;
  expanded_row_idx [N*k] int32;
  expert_tokens    int64, [experts in range] (types 0 cumsum / 1 count), [expert_num, 2] (type 2:
                   [expert, count] pairs), 0-dim when expert_tokens_num_flag is False;
  expanded_scale   float32 [rows of expanded_x] (drop/pad: [expert_num * expert_capacity]), 0-dim for
                   static quantisation.
Rows the routing does not fill (past the routed count, empty capacity slots) are zero, and so is their
scale: the NPU leaves them undefined.

Where the documentation leaves a choice open, vnpu follows the op-plugin tests: routes are sorted by expert
with a stable sort (routes below active_expert_range's start sort last); static quantisation computes
round(x * scale + offset) in float16, as the reference test does; dynamic quantisation scales each row by
max|x * smooth_scale[expert]| / 127. In drop/pad mode a route's slot is (expert - start) * capacity + its
rank within the expert, and expert_tokens counts the routes before the capacity drop. quant_mode 2 and 3
(MX FP8 with float8_e8m0 scales) are refused.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.quant import requantize
from torch_npu.ops.registration import npu_op

__all__ = []

OP = "npu_moe_init_routing_v2"
_INT32_MAX = 2**31 - 1


def _expert_range(active_expert_range, expert_num, expert_idx):
    if len(active_expert_range) == 2:
        start, end = active_expert_range
        check(0 <= start < end, OP, f"active_expert_range must be increasing, got {list(active_expert_range)}")
        return start, end
    if expert_num > 0:
        return 0, expert_num
    check(expert_idx.numel() > 0, OP, "expert_num or active_expert_range is needed when expert_idx is empty")
    return 0, int(expert_idx.max()) + 1


def _check_arguments(
    x,
    expert_idx,
    scale,
    offset,
    drop_pad_mode,
    expert_tokens_num_type,
    quant_mode,
    row_idx_type,
    expert_capacity,
    expert_num,
    range_length,
):
    check(
        x.dim() == 2 and expert_idx.dim() == 2 and expert_idx.shape[0] == x.shape[0],
        OP,
        f"x [N, H] and expert_idx [N, k] expected, got {tuple(x.shape)} and {tuple(expert_idx.shape)}",
    )
    check(drop_pad_mode in (0, 1), OP, f"drop_pad_mode must be 0 (dropless) or 1 (drop/pad), got {drop_pad_mode}")
    check(
        expert_tokens_num_type in (0, 1, 2),
        OP,
        f"expert_tokens_num_type must be 0, 1 or 2, got {expert_tokens_num_type}",
    )
    check(
        quant_mode in (-1, 0, 1),
        OP,
        f"quant_mode must be -1 (none), 0 (static) or 1 (dynamic), got {quant_mode}"
        + (" (MX FP8 quantisation is not supported by vnpu)" if quant_mode in (2, 3) else ""),
    )
    check(row_idx_type in (0, 1), OP, f"row_idx_type must be 0 or 1, got {row_idx_type}")
    if drop_pad_mode == 1:
        check(
            expert_capacity > 0 and expert_num >= range_length,
            OP,
            f"drop_pad_mode=1 needs expert_capacity > 0 and expert_num >= the experts in range ({range_length}), "
            f"got expert_capacity={expert_capacity}, expert_num={expert_num}",
        )
    if scale is None:
        check(quant_mode != 0, OP, "quant_mode=0 (static) needs scale")
        return
    if quant_mode == -1:
        check(
            scale.dim() == 1 and scale.shape[0] == x.shape[0],
            OP,
            f"scale must be [N={x.shape[0]}] without quantisation, got {tuple(scale.shape)}",
        )
    elif quant_mode == 0:
        check(
            scale.shape == (1,) and (offset is None or offset.shape == (1,)),
            OP,
            "static quantisation takes scale and offset of shape [1]",
        )
    else:
        check(
            scale.dim() == 2 and scale.shape[0] in (1, range_length) and scale.shape[1] == x.shape[1],
            OP,
            f"dynamic quantisation takes scale [1 or {range_length}, H={x.shape[1]}], got {tuple(scale.shape)}",
        )


def _shapes(
    x,
    expert_idx,
    active_num,
    expert_capacity,
    expert_num,
    drop_pad_mode,
    quant_mode,
    expert_tokens_num_type,
    expert_tokens_num_flag,
    range_length,
):
    n, k = expert_idx.shape
    if drop_pad_mode == 1:
        rows = expert_num * expert_capacity
        x_shape = (expert_num, expert_capacity, x.shape[1])
    else:
        rows = n * k if active_num <= 0 else min(active_num, n * k)
        x_shape = (rows, x.shape[1])
    if not expert_tokens_num_flag:
        tokens_shape = ()
    else:
        tokens_shape = (
            (range_length,) if expert_tokens_num_type in (0, 1) else (_pair_rows(expert_num, range_length), 2)
        )
    return x_shape, rows, tokens_shape, (() if quant_mode == 0 else (rows,))


def _quantise(rows_x, experts, start, scale, offset, quant_mode):
    """(int8 rows, per-row dequantisation scale or None) of the gathered rows."""
    if quant_mode == 0:
        value = rows_x.to(torch.float16) * scale.to(torch.float16)[0]
        if offset is not None:
            value = value + offset.to(torch.float16)[0]
        return requantize(value.float(), torch.int8), None
    value = rows_x.float()
    if scale is not None:
        value = value * (scale.float()[experts - start] if scale.shape[0] > 1 else scale.float()[0])
    row_scale = value.abs().amax(-1) / 127
    return requantize(value / row_scale.clamp(min=1e-30).unsqueeze(-1), torch.int8), row_scale


def _pair_rows(expert_num, range_length):
    return expert_num if expert_num > 0 else range_length


def _tokens(counts, start, end, expert_num, kind):
    if kind == 0:
        return counts.cumsum(0)
    if kind == 1:
        return counts
    pairs = torch.zeros(_pair_rows(expert_num, end - start), 2, dtype=torch.int64, device=counts.device)
    pairs[: end - start, 0] = torch.arange(start, end, device=counts.device)
    pairs[: end - start, 1] = counts
    return pairs


def _init_routing_v2_fake(
    x,
    expert_idx,
    *,
    scale=None,
    offset=None,
    active_num=-1,
    expert_capacity=-1,
    expert_num=-1,
    drop_pad_mode=0,
    expert_tokens_num_type=0,
    expert_tokens_num_flag=False,
    quant_mode=-1,
    active_expert_range=(),
    row_idx_type=0,
    x_dtype=None,
):
    check(
        len(active_expert_range) == 2 or expert_num > 0,
        OP,
        "tracing needs expert_num or active_expert_range (the expert count cannot be read from values)",
    )
    start, end = _expert_range(active_expert_range, expert_num, expert_idx)
    x_shape, _, tokens_shape, scale_shape = _shapes(
        x,
        expert_idx,
        active_num,
        expert_capacity,
        expert_num,
        drop_pad_mode,
        quant_mode,
        expert_tokens_num_type,
        expert_tokens_num_flag,
        end - start,
    )
    return (
        x.new_empty(x_shape, dtype=torch.int8 if quant_mode in (0, 1) else x.dtype),
        x.new_empty(expert_idx.numel(), dtype=torch.int32),
        x.new_empty(tokens_shape, dtype=torch.int64),
        x.new_empty(scale_shape, dtype=torch.float32),
    )


@npu_op(
    "npu_moe_init_routing_v2(Tensor x, Tensor expert_idx, *, Tensor? scale=None, Tensor? offset=None, "
    "int active_num=-1, int expert_capacity=-1, int expert_num=-1, int drop_pad_mode=0, "
    "int expert_tokens_num_type=0, bool expert_tokens_num_flag=False, int quant_mode=-1, "
    "int[2] active_expert_range=[], int row_idx_type=0, int? x_dtype=None) -> (Tensor, Tensor, Tensor, Tensor)",
    fake=_init_routing_v2_fake,
)
def npu_moe_init_routing_v2(
    x,
    expert_idx,
    *,
    scale=None,
    offset=None,
    active_num=-1,
    expert_capacity=-1,
    expert_num=-1,
    drop_pad_mode=0,
    expert_tokens_num_type=0,
    expert_tokens_num_flag=False,
    quant_mode=-1,
    active_expert_range=(),
    row_idx_type=0,
    x_dtype=None,
):
    """Routes of x [N, H] by expert_idx [N, k] whose expert lies in active_expert_range [start, end)
    (default all experts), stably sorted by expert. Dropless (drop_pad_mode 0): the first
    min(routes, active_num) sorted routes fill expanded_x's rows in order. Drop/pad (1): expert e's routes
    fill its expert_capacity slots in order, the rest are dropped. Returns (expanded_x, expanded_row_idx,
    expert_tokens, expanded_scale); expanded_row_idx: row_idx_type 0 gives each route's row in expanded_x
    (-1 when not routed), 1 the route of each sorted position. expert_tokens per expert (routes before any
    capacity drop): cumulative (type 0), counts (1) or [expert, count] pairs (2). expanded_scale: the
    route's token scale (no quantisation), the dynamic dequantisation scale per row (quant_mode 1).
    Shapes and the choices made where the documentation is silent: see the module docstring."""
    start, end = _expert_range(active_expert_range, expert_num, expert_idx)
    _check_arguments(
        x,
        expert_idx,
        scale,
        offset,
        drop_pad_mode,
        expert_tokens_num_type,
        quant_mode,
        row_idx_type,
        expert_capacity,
        expert_num,
        end - start,
    )
    x_shape, rows, _, _ = _shapes(
        x,
        expert_idx,
        active_num,
        expert_capacity,
        expert_num,
        drop_pad_mode,
        quant_mode,
        expert_tokens_num_type,
        expert_tokens_num_flag,
        end - start,
    )
    n, k = expert_idx.shape
    flat = expert_idx.reshape(-1).long()
    in_range = (flat >= start) & (flat < end)
    order = torch.argsort(torch.where(flat >= start, flat, torch.full_like(flat, _INT32_MAX)), stable=True)
    routed = order[: int(in_range.sum())]
    experts = flat[routed]
    counts = torch.bincount(experts - start, minlength=end - start)
    if drop_pad_mode == 1:
        first_of_expert = counts.cumsum(0) - counts
        rank = torch.arange(routed.numel(), device=x.device) - first_of_expert[experts - start]
        kept = rank < expert_capacity
        routed, experts = routed[kept], experts[kept]
        destination = (experts - start) * expert_capacity + rank[kept]
    else:
        routed, experts = routed[:rows], experts[:rows]
        destination = torch.arange(routed.numel(), device=x.device)
    gathered = x[routed // k]
    out_dtype = torch.int8 if quant_mode in (0, 1) else x.dtype
    expanded_x = torch.zeros(rows, x.shape[1], dtype=out_dtype, device=x.device)
    expanded_scale = torch.zeros(() if quant_mode == 0 else rows, dtype=torch.float32, device=x.device)
    if quant_mode == -1:
        expanded_x[destination] = gathered
        if scale is not None:
            expanded_scale[destination] = scale.float()[routed // k]
    else:
        quantised, row_scale = _quantise(gathered, experts, start, scale, offset, quant_mode)
        expanded_x[destination] = quantised
        if row_scale is not None:
            expanded_scale[destination] = row_scale
    if row_idx_type == 0:
        expanded_row_idx = torch.full((n * k,), -1, dtype=torch.int32, device=x.device)
        expanded_row_idx[routed] = destination.to(torch.int32)
    else:
        expanded_row_idx = order.to(torch.int32)
    if expert_tokens_num_flag:
        tokens = _tokens(counts, start, end, expert_num, expert_tokens_num_type)
    else:
        tokens = torch.zeros((), dtype=torch.int64, device=x.device)
    return expanded_x.view(x_shape), expanded_row_idx, tokens.to(torch.int64), expanded_scale
