"""npu_advance_step_flashattn: vLLM's advance_step_flashattn, the in-place update of a multi-step decode batch
(the AdvanceStep / AdvanceStepV2 kernels).

Decode (no spec_token / accepted_num), as the card computes it, one vector core per query:
    query q < min(num_queries, vector cores): input_tokens[q] = sampled_token_ids[q, 0];
        input_positions[q] = seq_lens[q]; seq_lens[q] += 1;
        slot_mapping[q] = (block_tables.flatten()[pos // block_size] + block_tables.stride(0) * q) * block_size
                          + pos % block_size            (pos = the new input position)
    padding: entries num_queries + i for i = 0, cores, 2 * cores, ... get token 0, position 0, slot -1.
  The block lookup reads the flattened table at pos // block_size and adds the row's offset to the block *number*
  (not to the index), and queries past the SoC's vector-core count keep their old values: both are what the
  kernel and torch_npu's own golden do, so vnpu does the same.
Speculative decoding (spec_token [num_seqs, spec_num] and accepted_num [num_seqs] both given; the 1-D state
tensors hold num_seqs rows of 1 + spec_num):
    input_positions[i, :] += accepted_num[i] + 1;  seq_lens = input_positions + 1;
    input_tokens[i, 0] = the token before the first -1 of sampled_token_ids[i] (-1 if the row starts with -1),
    input_tokens[i, 1:] = spec_token[i];  slot_mapping[i, j] = block_tables[i, pos // block_size] * block_size
                                                                + pos % block_size.
"""

import torch

import torch_npu
from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_OP = "npu_advance_step_flashattn"


def _int64(**tensors):
    for name, t in tensors.items():
        check(t.dtype == torch.int64, _OP, f"{name} must be int64, got {t.dtype}")


def _vector_cores(device):
    if device.type == "npu":
        return torch_npu.npu.get_device_properties(device).vector_core_num
    return torch_npu._C._soc_profile()["vector_core_num"]


def _block_numbers(table, index, what):
    check(
        bool(((index >= 0) & (index < table.numel())).all()),
        _OP,
        f"{what}: a block index falls outside block_tables of {tuple(table.shape)} (the card would read past it)",
    )
    return table.reshape(-1)[index]


def _decode(tokens, sampled, positions, seq_lens, slots, block_tables, num_seqs, num_queries, block_size):
    check(
        num_seqs > num_queries,
        _OP,
        f"num_seqs {num_seqs} should not be smaller or equal to num_queries {num_queries} without spec_token",
    )
    for name, t in (("input_tokens", tokens), ("input_positions", positions), ("seq_lens", seq_lens)):
        check(t.numel() == num_seqs, _OP, f"{name} must hold num_seqs={num_seqs} values, got {tuple(t.shape)}")
    check(
        slots.numel() == num_seqs, _OP, f"slot_mapping must hold num_seqs={num_seqs} values, got {tuple(slots.shape)}"
    )
    check(
        sampled.dim() == 2 and sampled.shape == (num_queries, 1),
        _OP,
        f"sampled_token_ids must be [num_queries={num_queries}, 1], got {tuple(sampled.shape)}",
    )
    cores = _vector_cores(tokens.device)
    tokens1, positions1, seq_lens1, slots1 = (t.view(-1) for t in (tokens, positions, seq_lens, slots))
    advanced = min(num_queries, cores)
    position = seq_lens1[:advanced].clone()
    block = _block_numbers(block_tables, position // block_size, "decode")  # checked before anything is written
    padded = torch.arange(num_queries, num_seqs, cores, device=tokens.device)
    tokens1[padded] = 0
    positions1[padded] = 0
    slots1[padded] = -1
    row_offset = block_tables.stride(0) * torch.arange(advanced, device=tokens.device)
    tokens1[:advanced] = sampled.reshape(-1)[:advanced]
    positions1[:advanced] = position
    seq_lens1[:advanced] = position + 1
    slots1[:advanced] = (block + row_offset) * block_size + position % block_size


def _speculative(tokens, sampled, positions, seq_lens, slots, block_tables, num_seqs, block_size, spec, accepted):
    check(
        spec.dim() == 2 and spec.shape[0] == num_seqs,
        _OP,
        f"spec_token must be [num_seqs={num_seqs}, spec_num], got {tuple(spec.shape)}",
    )
    check(
        accepted.dim() == 1 and accepted.shape[0] == num_seqs,
        _OP,
        f"accepted_num must be [num_seqs={num_seqs}], got {tuple(accepted.shape)}",
    )
    width = spec.shape[1] + 1
    check(
        tokens.dim() == 1 and tokens.shape[0] == num_seqs * width,
        _OP,
        f"input_tokens must be [num_seqs * (1 + spec_num)] = [{num_seqs * width}], got {tuple(tokens.shape)}",
    )
    check(
        sampled.dim() == 2 and sampled.shape == (num_seqs, width),
        _OP,
        f"sampled_token_ids must be [num_seqs, 1 + spec_num] = [{num_seqs}, {width}], got {tuple(sampled.shape)}",
    )
    for name, t in (("input_positions", positions), ("seq_lens", seq_lens), ("slot_mapping", slots)):
        check(t.shape == tokens.shape, _OP, f"{name} must be shaped like input_tokens {tuple(tokens.shape)}")
    position = positions.view(num_seqs, width) + accepted.view(num_seqs, 1) + 1
    rows = torch.arange(num_seqs, device=tokens.device).view(num_seqs, 1)
    index = rows * block_tables.shape[1] + position // block_size
    block = _block_numbers(block_tables, index, "speculative")
    stop = torch.cat([sampled, sampled.new_full((num_seqs, 1), -1)], dim=1).argmin(dim=1)
    last = torch.where(stop > 0, sampled.gather(1, (stop - 1).clamp(min=0).view(-1, 1)).view(-1), -1)
    positions.view(num_seqs, width).copy_(position)
    seq_lens.view(num_seqs, width).copy_(position + 1)
    slots.view(num_seqs, width).copy_(block * block_size + position % block_size)
    grid = tokens.view(num_seqs, width)
    grid[:, 0] = last
    grid[:, 1:] = spec


@npu_op(
    "npu_advance_step_flashattn(Tensor(a!) input_tokens, Tensor sampled_token_ids, Tensor(b!) input_positions, "
    "Tensor(c!) seq_lens, Tensor(d!) slot_mapping, Tensor block_tables, int num_seqs, int num_queries, "
    "int block_size, *, Tensor? spec_token=None, Tensor? accepted_num=None) -> ()",
    fake=lambda *args, **kwargs: None,
)
def npu_advance_step_flashattn(
    input_tokens,
    sampled_token_ids,
    input_positions,
    seq_lens,
    slot_mapping,
    block_tables,
    num_seqs,
    num_queries,
    block_size,
    *,
    spec_token=None,
    accepted_num=None,
):
    for name, value in (("num_seqs", num_seqs), ("num_queries", num_queries), ("block_size", block_size)):
        check(value >= 1, _OP, f"{name} must be a positive integer, got {value}")
    _int64(
        input_tokens=input_tokens,
        sampled_token_ids=sampled_token_ids,
        input_positions=input_positions,
        seq_lens=seq_lens,
        slot_mapping=slot_mapping,
        block_tables=block_tables,
    )
    check(
        block_tables.dim() == 2 and block_tables.shape[0] == num_seqs,
        _OP,
        f"block_tables must be [num_seqs={num_seqs}, blocks], got {tuple(block_tables.shape)}",
    )
    for name, t in (
        ("input_tokens", input_tokens),
        ("input_positions", input_positions),
        ("seq_lens", seq_lens),
        ("slot_mapping", slot_mapping),
    ):
        check(t.is_contiguous(), _OP, f"{name} must be contiguous (it is updated in place)")
    if spec_token is None or accepted_num is None:
        _decode(
            input_tokens,
            sampled_token_ids,
            input_positions,
            seq_lens,
            slot_mapping,
            block_tables,
            num_seqs,
            num_queries,
            block_size,
        )
        return
    _int64(spec_token=spec_token, accepted_num=accepted_num)
    check(
        num_queries == num_seqs,
        _OP,
        f"with spec_token, num_queries must equal num_seqs, got {num_queries} and {num_seqs}",
    )
    _speculative(
        input_tokens,
        sampled_token_ids,
        input_positions,
        seq_lens,
        slot_mapping,
        block_tables,
        num_seqs,
        block_size,
        spec_token,
        accepted_num,
    )
