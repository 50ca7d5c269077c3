"""npu_moe_init_routing_quant against the routing written out here (routes stably sorted by expert, rows gathered,
dynamically or statically quantised to int8), its token counts (cumulative or per expert) and the drop/pad
counts before the capacity drop."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error

N, H, K, E = 8, 16, 2, 4


def _inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(N, H, generator=g), torch.randint(0, E, (N, K), generator=g, dtype=torch.int32)


def routed(x, idx):
    order = torch.argsort(idx.reshape(-1).long(), stable=True)
    return order, x[order // K]


@pytest.mark.parametrize("mode", [1, 2])
def test_dynamic_dropless(mode):
    x, idx = _inputs(mode)
    order, rows = routed(x, idx)
    scale = rows.abs().amax(-1) / 127.0
    want_q = torch.round(rows / scale[:, None]).clamp(-128, 127).to(torch.int8)
    counts = torch.bincount(idx.reshape(-1).long(), minlength=E).to(torch.int32)
    q, row_idx, tokens, before, out_scale = torch_npu.npu_moe_init_routing_quant(
        x.npu(), idx.npu(), active_num=0, expert_num=E, expert_tokens_num_mode=mode, quant_mode=1
    )
    assert torch.equal(q.cpu(), want_q)
    torch.testing.assert_close(out_scale.cpu(), scale)
    assert torch.equal(tokens.cpu(), counts.cumsum(0).to(torch.int32) if mode == 1 else counts)
    assert before.numel() == 0
    assert torch.equal(row_idx.cpu().long(), torch.argsort(order)), "each route's row in expanded_x"


def test_static_with_active_num_and_drop_pad_counts():
    x, idx = _inputs(3)
    scale, offset = torch.tensor([20.0]), torch.tensor([1.0])
    q, _, tokens, _, out_scale = torch_npu.npu_moe_init_routing_quant(
        x.npu(), idx.npu(), scale=scale.npu(), offset=offset.npu(), active_num=5, expert_num=E, quant_mode=0
    )
    _, rows = routed(x, idx)
    want = torch.round((rows[:5].half() * scale.half() + offset.half()).float()).clamp(-128, 127).to(torch.int8)
    assert q.shape == (5, H) and torch.equal(q.cpu(), want) and out_scale.numel() == 0 and tokens.numel() == 0
    q2, _, _, before, _ = torch_npu.npu_moe_init_routing_quant(
        x.npu(), idx.npu(), expert_capacity=2, expert_num=E, drop_pad_mode=1, expert_tokens_before_capacity_flag=True
    )
    assert q2.shape == (E, 2, H)
    assert torch.equal(before.cpu(), torch.bincount(idx.reshape(-1).long(), minlength=E).to(torch.int32))
    raises_operator_error(
        lambda: torch_npu.npu_moe_init_routing_quant(x.npu(), idx.npu(), quant_mode=2),
        "npu_moe_init_routing_quant: Parameter 'quant_mode' must be 0 or 1, but got: 2",
    )
