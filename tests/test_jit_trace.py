"""torch.jit.trace and the TorchScript ONNX exporter on npu models: the traced graph, its results and the
exported ONNX model are those of the same model on the CPU."""

import copy
import io

import pytest
import torch
import torch.nn as nn
import torchvision

import torch_npu  # noqa: F401

MODELS = {
    "resnet18": (lambda: torchvision.models.resnet18(num_classes=10), (2, 3, 32, 32)),
    "conv1d_groupnorm": (lambda: nn.Sequential(nn.Conv1d(3, 4, 3), nn.GroupNorm(2, 4), nn.SiLU()), (2, 3, 9)),
    "conv3d": (lambda: nn.Conv3d(3, 4, 3), (1, 3, 5, 5, 5)),
    "conv_transpose_upsample": (
        lambda: nn.Sequential(nn.ConvTranspose2d(3, 4, 3, stride=2), nn.Upsample(scale_factor=2), nn.AvgPool2d(2)),
        (2, 3, 8, 8),
    ),
    "lstm": (lambda: nn.LSTM(8, 16, 2, batch_first=True), (2, 5, 8)),
    "gru_bidirectional": (lambda: nn.GRU(8, 16, batch_first=True, bidirectional=True), (2, 5, 8)),
    "rnn_cell": (lambda: nn.RNNCell(8, 8), (3, 8)),
}


def _pair(name):
    make, shape = MODELS[name]
    torch.manual_seed(0)
    model = make().eval()
    x = torch.randn(*shape)
    return (model, x), (copy.deepcopy(model).npu(), x.npu())


def _tensors(output):
    if isinstance(output, torch.Tensor):
        return [output]
    return [t for item in output for t in _tensors(item)]


def _aten_kinds(traced):
    return [node.kind() for node in traced.graph.nodes() if node.kind().startswith("aten::")]


@pytest.mark.parametrize("name", MODELS)
def test_traced_npu_model_is_the_traced_cpu_model(name):
    (cpu_model, x), (npu_model, x_npu) = _pair(name)
    with torch.no_grad():
        on_cpu, on_npu = torch.jit.trace(cpu_model, x), torch.jit.trace(npu_model, x_npu)
        assert _aten_kinds(on_npu) == _aten_kinds(on_cpu)
        for expected, got in zip(_tensors(on_cpu(x)), _tensors(on_npu(x_npu)), strict=True):
            assert got.device.type == "npu"
            assert torch.equal(got.cpu(), expected)


def _onnx(model, x):
    import onnx

    buffer = io.BytesIO()
    torch.onnx.export(model, (x,), buffer, dynamo=False)
    return onnx.load_from_string(buffer.getvalue())


@pytest.mark.parametrize("name", ["resnet18", "lstm", "gru_bidirectional", "conv_transpose_upsample"])
def test_onnx_export_of_an_npu_model_is_the_cpu_export(name):
    pytest.importorskip("onnx", reason="the ONNX package is not installed")
    from onnx import numpy_helper

    (cpu_model, x), (npu_model, x_npu) = _pair(name)
    on_cpu, on_npu = _onnx(cpu_model, x), _onnx(npu_model, x_npu)
    assert [n.op_type for n in on_npu.graph.node] == [n.op_type for n in on_cpu.graph.node]
    weights = {i.name: numpy_helper.to_array(i) for i in on_cpu.graph.initializer}
    npu_weights = {i.name: numpy_helper.to_array(i) for i in on_npu.graph.initializer}
    assert npu_weights.keys() == weights.keys()
    for key, value in weights.items():
        assert (npu_weights[key] == value).all(), key


def test_traced_lstm_cell_records_the_fused_cell_as_on_the_card():
    # ATen's LSTM/GRU cells call the fused cell on every non-CPU device: the traced graph holds it (and runs it),
    # which the TorchScript ONNX exporter has no symbolic for, as with a card's trace.
    torch.manual_seed(0)
    cell = nn.LSTMCell(8, 8).eval()
    x = torch.randn(3, 8)
    with torch.no_grad():
        traced = torch.jit.trace(copy.deepcopy(cell).npu(), x.npu())
        expected = cell(x)
        got = traced(x.npu())
    assert "aten::_thnn_fused_lstm_cell" in _aten_kinds(traced)
    for e, g in zip(expected, got, strict=True):
        torch.testing.assert_close(g.cpu(), e, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("layer", [nn.GRU, nn.RNN, nn.LSTM])
@pytest.mark.parametrize("grad", [False, True])
def test_batch_first_recurrent_layers_equal_the_cpu_with_and_without_grad(layer, grad):
    # Without grad the CPU's matmul still folds the batch into one mm when the weight requires grad
    torch.manual_seed(0)
    model = layer(8, 16, batch_first=True, bidirectional=True).eval()
    x = torch.randn(2, 5, 8)
    npu_model = copy.deepcopy(model).npu()
    with torch.set_grad_enabled(grad):
        expected, got = model(x), npu_model(x.npu())
    for e, g in zip(_tensors(expected), _tensors(got), strict=True):
        assert torch.equal(g.detach().cpu(), e.detach())
