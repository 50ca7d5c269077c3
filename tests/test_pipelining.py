"""torch_npu.distributed.pipelining.pipeline: PyTorch's splitter (export mode) and torch_npu's FX mode, which keeps
PyTorch's layers and the named atomic units whole, so models torch.export cannot capture still split."""

import pytest
import torch
from pipeline_models import GatedNet
from test_distributed import _all_ok, launch
from torch.distributed.pipelining import SplitPoint

import torch_npu
from torch_npu.distributed.pipelining import pipeline

SPEC = {"layers.2": SplitPoint.BEGINNING}


def test_fx_mode_stages_train_across_two_ranks_as_the_model_does_on_the_cpu():
    _all_ok(launch("pipeline_fx", 2))


@pytest.mark.parametrize("point", [SplitPoint.BEGINNING, SplitPoint.END])
def test_fx_mode_stages_compute_the_model_on_npu_as_on_the_cpu(point):
    x = torch.randn(4, 8)
    outputs = []
    for device in ("cpu", "npu"):
        model = GatedNet().to(device)
        pipe = pipeline(model, (x.to(device),), split_spec={"layers.1": point}, mode="fx", atomic_units=["layers.1"])
        first = pipe.get_stage_module(0)
        assert pipe.num_stages == 2
        assert ("layers_1" in dict(first.named_children())) == (point == SplitPoint.END)
        out = pipe(x.to(device))  # what the model returns
        assert torch.equal(out.cpu(), model(x.to(device)).detach().cpu())
        outputs.append(out.cpu())
    assert torch.equal(outputs[0], outputs[1])


def test_split_policy_and_a_model_without_split_points():
    x = torch.randn(4, 8).npu()
    model = GatedNet().npu()
    whole = pipeline(model, (x,), mode="fx", atomic_units=["layers.1"])
    assert whole.num_stages == 1
    seen = []

    def policy(graph_module):
        seen.append(sorted({n.target for n in graph_module.graph.nodes if n.op == "call_module"}))
        return graph_module

    assert pipeline(model, (x,), split_policy=policy, mode="fx", atomic_units=["layers.1"]).num_stages == 1
    assert seen == [["layers.0", "layers.1", "layers.2", "layers.3"]]


def test_arguments_are_checked_with_torch_npus_messages():
    x = torch.randn(4, 8).npu()
    model = GatedNet().npu()
    for kwargs, message in (
        (
            {"split_spec": SPEC, "split_policy": lambda g: g},
            "Cannot specify both `split_spec` and `split_policy`. Please use only one of them.",
        ),
        ({"split_spec": SPEC, "atomic_units": ["layers.1"]}, "`atomic_units` is only supported when `mode='fx'`."),
        ({"split_spec": SPEC, "mode": "jit"}, "`mode` must be one of None, 'export', or 'fx', got 'jit'."),
        (
            {"split_spec": SPEC, "mode": "fx", "atomic_units": ["layers.1", "layers.9"]},
            "atomic_units contains module names that do not exist in the model: layers.9",
        ),
        (
            {"split_spec": {"head": SplitPoint.END}, "mode": "fx", "atomic_units": ["layers.1"]},
            "split_spec target 'head' did not match any module call of the traced model",
        ),
        (
            {"split_spec": {"layers.2": "middle"}, "mode": "fx", "atomic_units": ["layers.1"]},
            "Unsupported split point for target 'layers.2': middle",
        ),
    ):
        with pytest.raises(ValueError) as err:
            pipeline(model, (x,), **kwargs)
        assert str(err.value) == message
    with pytest.raises(ValueError) as err:
        pipeline(model, (x, x), split_spec=SPEC, mode="fx", atomic_units=["layers.1"])
    assert str(err.value) == "Failed to bind example inputs to forward signature: too many positional arguments"


def test_the_name_is_torch_npus():
    assert torch_npu.distributed.pipelining.pipeline is pipeline
    assert pipeline.__module__ == "torch_npu.distributed.pipelining"
