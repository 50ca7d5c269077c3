"""npu_fused_causal_conv1d(_v2): the causal depthwise conv1d of Mamba-style / linear-attention layers (Qwen3-Next,
Pangu V2) over variable-length sequences, reading and updating each sequence's cached tail in conv_states.

x [cu_seq_len, dim] (sequences split by query_start_loc [batch + 1]) or [batch, seq, dim]; weight [K = 3, dim];
conv_states [lines, C, dim] (C = K - 1 + m). For sequence b (skipped when its cache line is pad_slot_id), with
line = cache_indices[b] (b without cache_indices):
    cached = zeros(K - 1) and offset 0 when num_computed_tokens[b] == 0 or initial_state_mode[b] is 0 (no initial
             state) or 2 (no initial state, and the first K - 1 outputs are 0); else offset = num_accepted_tokens[b]
             - 1 (speculative decoding) or C - (K - 1), and cached = conv_states[line][: offset + K - 1]
    padded = cached ++ x_b;  conv_states[line][C - M:] = padded[-M:]  (M = min(C, len(padded)))
    y[i] = sum_k weight[k] * padded[offset + i + k];  conv_mode "pangu": the first K - 1 - num_computed_tokens[b]
    outputs are 0;  residual_connection 1: y += x
Sums in float32, y in x's dtype. npu_fused_causal_conv1d returns y; _v2 writes y into x. Prefix caching (a 2-D
cache_indices) is not computed by vnpu.
"""

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_fused_causal_conv1d"
_WIDTH = 3
_ARGS = (
    "Tensor? query_start_loc=None, Tensor? cache_indices=None, Tensor? initial_state_mode=None, Tensor? bias=None, "
    'Tensor? num_accepted_tokens=None, str? activation="None", int? pad_slot_id=-1, int? run_mode=0, '
    "int? residual_connection=0, int? max_query_len=-1, Tensor? num_computed_tokens=None, "
    "Tensor? block_idx_first_scheduled_token=None, Tensor? block_idx_last_scheduled_token=None, "
    'Tensor? initial_state_idx=None, int? block_size=128, str? conv_mode="default"'
)


def _sequences(x, query_start_loc, op):
    """(x as [tokens, dim], [(start, end)] per sequence, the shape to give y back)."""
    if x.dim() == 3:
        b, s, d = x.shape
        return x.reshape(b * s, d), [(i * s, (i + 1) * s) for i in range(b)]
    check(x.dim() == 2, op, f"x must be [cu_seq_len, dim] or [batch, seq, dim], got {tuple(x.shape)}")
    check(query_start_loc is not None, op, "query_start_loc is required when x is 2-D")
    bounds = [int(v) for v in query_start_loc.tolist()]
    check(bounds and bounds[0] == 0 and bounds[-1] == x.shape[0] and all(a <= b for a, b in zip(bounds, bounds[1:])), op,
          f"query_start_loc must rise from 0 to cu_seq_len ({x.shape[0]}), got {bounds}")  # fmt: skip
    return x, list(zip(bounds[:-1], bounds[1:]))


def _conv(x, weight, conv_states, query_start_loc, cache_indices, initial_state_mode, num_accepted_tokens, pad_slot_id,
          residual_connection, num_computed_tokens, conv_mode, op):  # fmt: skip
    """y (x's shape and dtype); conv_states is updated in place."""
    check(tuple(weight.shape) == (_WIDTH, x.shape[-1]), op, f"weight must be [{_WIDTH}, {x.shape[-1]}], got {tuple(weight.shape)}")  # fmt: skip
    check(conv_states.dim() == 3 and conv_states.shape[-1] == x.shape[-1] and conv_states.shape[1] >= _WIDTH - 1, op,
          f"conv_states must be [lines, >= {_WIDTH - 1}, {x.shape[-1]}], got {tuple(conv_states.shape)}")  # fmt: skip
    check(cache_indices is None or cache_indices.dim() == 1, op, "automatic prefix caching (a 2-D cache_indices) is not computed by vnpu")  # fmt: skip
    check(conv_mode in ("default", "pangu", None), op, f"conv_mode must be 'default' or 'pangu', got {conv_mode!r}")
    check(conv_mode != "pangu" or num_computed_tokens is not None, op, "conv_mode 'pangu' needs num_computed_tokens")
    rows, spans = _sequences(x, query_start_loc, op)
    modes = [int(v) for v in initial_state_mode.tolist()] if initial_state_mode is not None else [1] * len(spans)
    check(len(modes) == len(spans) and set(modes) <= {0, 1, 2}, op,
          f"initial_state_mode must hold 0, 1 or 2 for each of the {len(spans)} sequences, got {modes}")  # fmt: skip
    y = torch.zeros(rows.shape, device=x.device)
    w = weight.float()
    state_len = conv_states.shape[1]
    for b, (start, end) in enumerate(spans):
        line = int(cache_indices[b]) if cache_indices is not None else b
        if pad_slot_id is not None and pad_slot_id != -1 and line == pad_slot_id:
            continue
        if modes[b] != 1 or (num_computed_tokens is not None and int(num_computed_tokens[b]) == 0):
            offset, cached = 0, conv_states.new_zeros(_WIDTH - 1, x.shape[-1]).float()
        else:
            offset = int(num_accepted_tokens[b]) - 1 if num_accepted_tokens is not None else state_len - (_WIDTH - 1)
            check(0 <= offset <= state_len - (_WIDTH - 1), op, f"sequence {b}'s cache offset {offset} is outside conv_states")  # fmt: skip
            cached = conv_states[line, : offset + _WIDTH - 1].float()
        padded = torch.cat([cached, rows[start:end].float()])
        keep = min(state_len, padded.shape[0])
        conv_states[line, state_len - keep :] = padded[padded.shape[0] - keep :].to(conv_states.dtype)
        window = padded[offset:]
        length = end - start
        out = sum(w[k] * window[k : k + length] for k in range(_WIDTH))
        if conv_mode == "pangu":
            out[: min(max(_WIDTH - 1 - int(num_computed_tokens[b]), 0), length)] = 0
        if modes[b] == 2:
            out[: _WIDTH - 1] = 0
        if residual_connection:
            out = out + rows[start:end].float()
        y[start:end] = out
    return y.to(x.dtype).reshape(x.shape)


@npu_op(
    f"npu_fused_causal_conv1d(Tensor x, Tensor weight, Tensor(a!) conv_states, *, {_ARGS}) -> Tensor",
    fake=lambda x, weight, conv_states, **kwargs: torch.empty_like(x),
)
def npu_fused_causal_conv1d(x, weight, conv_states, *, query_start_loc=None, cache_indices=None,
                            initial_state_mode=None, bias=None, num_accepted_tokens=None, activation="None",
                            pad_slot_id=-1, run_mode=0, residual_connection=0, max_query_len=-1,
                            num_computed_tokens=None, block_idx_first_scheduled_token=None,
                            block_idx_last_scheduled_token=None, initial_state_idx=None, block_size=128,
                            conv_mode="default"):  # fmt: skip
    """y; conv_states updated in place."""
    return _conv(x, weight, conv_states, query_start_loc, cache_indices, initial_state_mode, num_accepted_tokens, pad_slot_id,
                 residual_connection, num_computed_tokens, conv_mode, _OP)  # fmt: skip


@npu_op(
    f"npu_fused_causal_conv1d_v2(Tensor(a!) x, Tensor weight, Tensor(b!) conv_states, *, {_ARGS}) -> ()",
    fake=lambda *args, **kwargs: None,
)
def npu_fused_causal_conv1d_v2(x, weight, conv_states, *, query_start_loc=None, cache_indices=None,
                               initial_state_mode=None, bias=None, num_accepted_tokens=None, activation="None",
                               pad_slot_id=-1, run_mode=0, residual_connection=0, max_query_len=-1,
                               num_computed_tokens=None, block_idx_first_scheduled_token=None,
                               block_idx_last_scheduled_token=None, initial_state_idx=None, block_size=128,
                               conv_mode="default"):  # fmt: skip
    """y written into x; conv_states updated in place."""
    y = _conv(x, weight, conv_states, query_start_loc, cache_indices, initial_state_mode, num_accepted_tokens, pad_slot_id,
              residual_connection, num_computed_tokens, conv_mode, "npu_fused_causal_conv1d_v2")  # fmt: skip
    x.copy_(y)
