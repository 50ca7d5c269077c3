"""Graph capture with auto_dispatch_capture: operators with a graph handler (torch_npu registers the fused
inference attention operators) are captured as one updatable group each, and NPUGraph.update issues them again
with new host-side arguments before a replay, as decode steps of inference engines do. Also the .out overloads
as torch_npu's bindings take them (out=[...])."""

import pytest
import torch
from error_cases import raises_exactly

import torch_npu

KW = dict(num_heads=4, input_layout="BNSD", scale=0.125, pre_tokens=65535, next_tokens=65535)


def _qkv(kv_len=8):
    torch.manual_seed(0)
    q = torch.randn(1, 4, 1, 16, dtype=torch.float16).npu()
    k = torch.randn(1, 4, kv_len, 16, dtype=torch.float16).npu()
    v = torch.randn(1, 4, kv_len, 16, dtype=torch.float16).npu()
    return q, k, v


def _eager(q, k, v, kv_lengths):
    return torch_npu.npu_fused_infer_attention_score(q, k, v, actual_seq_lengths_kv=kv_lengths, **KW)[0]


@pytest.mark.parametrize("form", ["functional", "out"])
def test_updated_sequence_lengths_are_used_by_the_replay(form):
    q, k, v = _qkv()
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, auto_dispatch_capture=True):
        if form == "functional":
            out, _ = torch_npu.npu_fused_infer_attention_score(q, k, v, actual_seq_lengths_kv=[8], **KW)
        else:
            out = torch.empty(1, 4, 1, 16, dtype=torch.float16, device="npu")
            placeholder = torch.empty(1, dtype=torch.float16, device="npu")  # softmax_lse is not requested
            torch_npu.npu_fused_infer_attention_score.out(
                q, k, v, actual_seq_lengths_kv=[8], out=[out, placeholder], **KW
            )
    g.replay()
    assert torch.equal(out.cpu(), _eager(q, k, v, [8]).cpu())
    for lengths in ([3], [6], [8]):
        g.update(cpu_update_input=[{"actual_seq_lengths_kv": lengths}])
        g.replay()
        assert torch.equal(out.cpu(), _eager(q, k, v, lengths).cpu())


def test_each_handled_operator_takes_its_own_update_in_capture_order():
    q, k, v = _qkv()
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, auto_dispatch_capture=True):
        first, _ = torch_npu.npu_fused_infer_attention_score(q, k, v, actual_seq_lengths_kv=[8], **KW)
        doubled = first * 2  # an operator between them, without a handler
        second, _ = torch_npu.npu_fused_infer_attention_score(q, k, v, actual_seq_lengths_kv=[8], **KW)
    g.update(cpu_update_input=[{"actual_seq_lengths_kv": [2]}, {"actual_seq_lengths_kv": [5]}])
    g.replay()
    assert torch.equal(first.cpu(), _eager(q, k, v, [2]).cpu())
    assert torch.equal(doubled.cpu(), (_eager(q, k, v, [2]) * 2).cpu())
    assert torch.equal(second.cpu(), _eager(q, k, v, [5]).cpu())
    with pytest.raises(RuntimeError, match="got 1 updates for 2 captured operators"):
        g.update(cpu_update_input=[{"actual_seq_lengths_kv": [2]}])
    raises_exactly(
        lambda: g.update(cpu_update_input=[{"seq_len": [2]}, {"actual_seq_lengths_kv": [5]}]),
        RuntimeError,
        "NPUGraph.update: npu::npu_fused_infer_attention_score has no argument named 'seq_len'",
    )


def test_a_users_handler_with_torch_npus_hooks():
    seen = []

    @torch.npu.register_npu_graph_handler(["npu_rms_norm.default"])
    class EpsilonHandler(torch.npu.NpuGraphOpHandler):
        @classmethod
        def prepare_capture(cls, func, args, kwargs):
            seen.append(func._schema.name)
            return func, args, kwargs

        @classmethod
        def update_args(cls, record, update_input):
            record.args[2] = update_input["eps"]  # npu_rms_norm(x, gamma, epsilon)

    try:
        x, gamma = torch.randn(2, 8).npu(), torch.rand(8).npu()
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g, auto_dispatch_capture=True):
            y, _ = torch_npu.npu_rms_norm(x, gamma, 1e-6)
        g.update(cpu_update_input=[{"eps": 0.5}])
        g.replay()
        assert seen == ["npu::npu_rms_norm"]
        assert torch.equal(y.cpu(), torch_npu.npu_rms_norm(x, gamma, 0.5)[0].cpu())
    finally:
        from torch_npu.npu.graphs import _graph_handlers

        _graph_handlers.pop("npu_rms_norm.default")


def test_out_overloads_take_torch_npus_out_list():
    q, k, v = _qkv()
    want = _eager(q, k, v, [8])
    out = torch.empty_like(want)
    placeholder = torch.zeros(1, dtype=torch.float16, device="npu")
    result = torch_npu.npu_fused_infer_attention_score.out(
        q, k, v, actual_seq_lengths_kv=[8], out=[out, placeholder], **KW
    )
    assert result[0] is out and torch.equal(out.cpu(), want.cpu())
    assert torch.equal(placeholder.cpu(), torch.zeros(1, dtype=torch.float16))  # not requested: left alone
    named = torch.empty_like(want)
    torch_npu.npu_fused_infer_attention_score.out(
        q, k, v, actual_seq_lengths_kv=[8], attention_out=named, softmax_lse=placeholder, **KW
    )
    assert torch.equal(named.cpu(), want.cpu())
    raises_exactly(
        lambda: torch_npu.npu_fused_infer_attention_score.out(q, k, v, out=[out], **KW),
        TypeError,
        "npu::npu_fused_infer_attention_score: out= takes 2 tensors (attention_out, softmax_lse), got 1",
    )


def test_fusion_attention_v3_forward_and_backward_take_new_sequence_lengths():
    torch.manual_seed(0)
    q, k, v, dy = (torch.randn(32, 2, 16, dtype=torch.float16).npu() for _ in range(4))
    kw = dict(head_num=2, input_layout="TND", keep_prob=1.0, scale=0.25)
    captured, new = [torch.tensor([16, 32]), torch.tensor([16, 32])], [torch.tensor([8, 32]), torch.tensor([24, 32])]
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, auto_dispatch_capture=True):
        forward = torch_npu.npu_fusion_attention_v3(
            q, k, v, actual_seq_qlen=captured[0], actual_seq_kvlen=captured[1], **kw
        )
    g.update(cpu_update_input=[{"actual_seq_qlen": new[0], "actual_seq_kvlen": new[1]}])
    g.replay()
    want = torch_npu.npu_fusion_attention_v3(q, k, v, actual_seq_qlen=new[0], actual_seq_kvlen=new[1], **kw)
    assert torch.equal(forward[0].cpu(), want[0].cpu())
    saved = dict(softmax_max=want[1], softmax_sum=want[2], attention_in=want[0])
    bkw = dict(head_num=2, input_layout="TND", keep_prob=1.0, scale_value=0.25, **saved)
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, auto_dispatch_capture=True):
        grads = torch_npu.npu_fusion_attention_grad_v3(
            q, k, v, dy, actual_seq_qlen=captured[0], actual_seq_kvlen=captured[1], **bkw
        )
    g.update(cpu_update_input=[{"actual_seq_qlen": new[0], "actual_seq_kvlen": new[1]}])
    g.replay()
    want_grads = torch_npu.npu_fusion_attention_grad_v3(
        q, k, v, dy, actual_seq_qlen=new[0], actual_seq_kvlen=new[1], **bkw
    )
    assert all(torch.equal(a.cpu(), b.cpu()) for a, b in zip(grads[:3], want_grads[:3]))
