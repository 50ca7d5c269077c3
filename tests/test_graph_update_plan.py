"""ACL graph update plans: a compiled graph replayed through an NPU graph gives its attention operators each
replay's sequence lengths (inputs of the compiled function) by updating the captured graph, instead of capturing
one graph per length; the plan builder, resolver and checks; torch_npu's module paths for them."""

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

import torch_npu
from torch_npu._inductor import graph_runner
from torch_npu._inductor._aclgraph_update_plan.codegen import (
    build_aclgraph_update_plan_entry_for_inductor,
    build_aclgraph_update_plan_for_graph,
)
from torch_npu.npu._aclgraph_update_plan import (
    ACLGRAPH_UPDATE_PLAN_GLOBAL,
    build_cpu_update_input_for_graph,
    resolve_aclgraph_update_plan,
    validate_aclgraph_update_plan,
)
from torch_npu.npu._npugraph_handlers.npugraph_handler import _NPU_GRAPH_OP_HANDLERS

FIAS = torch.ops.npu.npu_fused_infer_attention_score.default


def _attend(q, k, v, kv_len):
    out, _ = torch_npu.npu_fused_infer_attention_score(
        q, k, v, actual_seq_lengths_kv=[kv_len], num_heads=2, input_layout="BNSD", scale=0.5
    )
    return out * 2


def _inputs():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(*shape, generator=g).npu() for shape in ((1, 2, 1, 8), (1, 2, 16, 8), (1, 2, 16, 8))]


@pytest.fixture
def runners(monkeypatch):
    made = []
    init = graph_runner.NpuGraphRunner.__init__

    def recording_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(graph_runner.NpuGraphRunner, "__init__", recording_init)
    yield made
    made.clear()  # the runners (and their graphs) go with the test


def test_one_captured_graph_serves_every_sequence_length(runners):
    q, k, v = _inputs()
    torch._dynamo.reset()
    compiled = torch.compile(_attend, backend="npugraphs", dynamic=True)
    for length in (5, 9, 12, 3, 16, 9):
        assert torch.equal(compiled(q, k, v, length).cpu(), _attend(q, k, v, length).cpu())
    [runner] = runners
    assert len(runner.recordings) == 1
    assert runner.update_plan == [
        {
            "op": "npu_fused_infer_attention_score.default",
            "updates": {"actual_seq_lengths_kv": {"kind": "list", "items": [{"kind": "input", "index": 5}]}},
        }
    ]


def test_a_length_that_also_feeds_other_operators_gets_a_graph_per_value():
    def attend_and_scale(q, k, v, kv_len):
        return _attend(q, k, v, kv_len) * kv_len

    gm = make_fx(attend_and_scale, tracing_mode="symbolic")(*_inputs(), 5)
    assert build_aclgraph_update_plan_for_graph(gm) is None
    gm = make_fx(_attend, tracing_mode="symbolic")(*_inputs(), 5)
    plan, inputs = build_aclgraph_update_plan_for_graph(gm)
    assert inputs == [3] and plan[0]["op"] == "npu_fused_infer_attention_score.default"


def test_torch_npus_handlers_give_the_sequence_length_arguments_as_update_specs():
    handler = _NPU_GRAPH_OP_HANDLERS["npu_fused_infer_attention_score.default"]
    assert handler.get_update_specs("npu_fused_infer_attention_score.default") == [
        ("kwarg", "actual_seq_lengths", "actual_seq_lengths"),
        ("kwarg", "actual_seq_lengths_kv", "actual_seq_lengths_kv"),
    ]
    assert _NPU_GRAPH_OP_HANDLERS is torch_npu.npu.graphs._graph_handlers


def test_plan_entries_map_graph_inputs_constants_and_lists():
    class Value:
        def __init__(self, name):
            self.name = name

    kv_len = Value("arg3_1")
    entry = build_aclgraph_update_plan_entry_for_inductor(
        FIAS, ("q", "k", "v"), {"actual_seq_lengths": [4], "actual_seq_lengths_kv": [kv_len, 7]},
        ["arg0_1", "arg1_1", "arg2_1", "arg3_1"], {},
    )  # fmt: skip
    assert entry["updates"] == {
        "actual_seq_lengths": {"kind": "list", "items": [{"kind": "constant", "value": 4}]},
        "actual_seq_lengths_kv": {
            "kind": "list",
            "items": [{"kind": "input", "index": 3}, {"kind": "constant", "value": 7}],
        },  # fmt: skip
    }
    assert resolve_aclgraph_update_plan([entry], ["q", "k", "v", 11]) == [
        {"actual_seq_lengths": [4], "actual_seq_lengths_kv": [11, 7]}
    ]
    assert build_aclgraph_update_plan_entry_for_inductor(FIAS, ("q", "k", "v"), {}, [], {}) is None
    with pytest.raises(RuntimeError, match="Tensor constant of the graph"):
        build_aclgraph_update_plan_entry_for_inductor(FIAS, ("q", "k", "v"), {"actual_seq_lengths": torch.tensor([1])}, [], {})  # fmt: skip


class _Record:
    def __init__(self, op, **kwargs):
        self.op_cache_entry, self.kwargs = op, kwargs


@pytest.mark.parametrize(
    ("plan", "records", "message"),
    [
        (
            [],
            [_Record(FIAS)],
            "aclgraph update plan: missing for 1 captured operators with updatable arguments; the graph may come from cached compiled code built without one (clear the inductor cache and compile again)",
        ),  # fmt: skip
        (
            [{"op": "x.default", "updates": {}}],
            [],
            "aclgraph update plan: length mismatch: 1 entries for 0 captured operators",
        ),  # fmt: skip
        (["entry"], [_Record(FIAS)], "aclgraph update plan: invalid plan entry 'entry': a dict with op and updates"),
        (
            [{"op": "npu_fusion_attention_v3.out", "updates": {}}],
            [_Record(FIAS)],
            "aclgraph update plan: op mismatch: the plan has npu_fusion_attention_v3.out, the graph captured npu_fused_infer_attention_score.default",
        ),  # fmt: skip
        (
            [{"op": "npu_fused_infer_attention_score.out", "updates": {}}],
            [_Record(FIAS)],
            "aclgraph update plan: the entry of npu_fused_infer_attention_score.out has no updates",
        ),  # fmt: skip
        (
            [{"op": FIAS.__name__, "updates": {"scale": {"kind": "constant", "value": 1.0}}}],
            [_Record(FIAS)],
            "aclgraph update plan: scale is not an updatable argument of npu_fused_infer_attention_score.default",
        ),  # fmt: skip
        (
            [{"op": FIAS.__name__, "updates": {"actual_seq_lengths": {"kind": "constant", "value": "4"}}}],
            [_Record(FIAS)],
            "aclgraph update plan: unsupported constant '4' for npu_fused_infer_attention_score.default: ints, floats, bools or None",
        ),  # fmt: skip
    ],
)
def test_plans_that_do_not_fit_the_captured_graph_are_refused(plan, records, message):
    with pytest.raises(RuntimeError) as info:
        validate_aclgraph_update_plan(plan, records)
    assert str(info.value).splitlines()[0] == message


def test_the_resolved_plan_is_npugraph_updates_cpu_update_input():
    plan = [{"op": FIAS.__name__, "updates": {"actual_seq_lengths_kv": {"kind": "list", "items": [{"kind": "input", "index": 0}]}}}]  # fmt: skip
    assert ACLGRAPH_UPDATE_PLAN_GLOBAL == "_torch_npu_aclgraph_update_plan"
    assert build_cpu_update_input_for_graph(plan, [6], [_Record(FIAS)]) == [{"actual_seq_lengths_kv": [6]}]
    for source, message in (
        ({"kind": "input", "index": "0"}, "an input source needs an int index"),
        ({"kind": "list", "items": 4}, "a list source needs items"),
    ):
        with pytest.raises(RuntimeError) as info:
            validate_aclgraph_update_plan([{"op": FIAS.__name__, "updates": {"actual_seq_lengths": source}}], [_Record(FIAS)])  # fmt: skip
        assert str(info.value).splitlines()[0] == (
            f"aclgraph update plan: invalid source {source!r} for npu_fused_infer_attention_score.default: {message}"
        )
    with pytest.raises(RuntimeError) as info:
        build_aclgraph_update_plan_entry_for_inductor(FIAS, ("q", "k", "v"), {"actual_seq_lengths": ["n"]}, [], {})
    assert str(info.value).splitlines()[0] == (
        "aclgraph update plan: npu_fused_infer_attention_score.default's actual_seq_lengths ('n') is neither a graph "
        "input nor a constant"
    )
    with pytest.raises(RuntimeError, match="input index 2 is out of range for 1 inputs"):
        resolve_aclgraph_update_plan([{"op": "x", "updates": {"a": {"kind": "input", "index": 2}}}], [1])
