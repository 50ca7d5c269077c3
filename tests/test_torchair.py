"""torchair on vnpu: CompilerConfig validates its options as torchair does, get_npu_backend compiles in both
modes (max-autotune runs the ATen graphs, reduce-overhead replays NPU graphs), and the helpers torchair
users call work; names vnpu does not provide say so."""

import pytest
import torch
from compile_models import MLP, train

import torchair

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def test_compiler_config_validates_like_torchair():
    config = torchair.CompilerConfig()
    assert config.mode.value == "max-autotune"
    config.mode = "reduce-overhead"
    config.experimental_config.frozen_parameter = True
    config.ge_config.oo_level = "O1"
    assert config.as_dict()["mode"] == "reduce-overhead"
    assert config.as_dict()["experimental_config.frozen_parameter"] == "1"
    with pytest.raises(ValueError, match=r"'gpu' not in optional list \['max-autotune', 'reduce-overhead'\]"):
        config.mode = "gpu"
    with pytest.raises(ValueError, match=r"_GEConfig has no option oo_levle, all options \['enable_single_stream'"):
        config.ge_config.oo_levle = "O1"
    with pytest.raises(ValueError, match=r"Please set value in \[-1, 9223372036854775807\], -5 is out of range"):
        config.experimental_config.static_model_ops_lower_limit = -5
    assert torchair.CompilerConfig() == torchair.CompilerConfig() and config != torchair.CompilerConfig()


@pytest.mark.parametrize("mode", ["max-autotune", "reduce-overhead"])
def test_npu_backend_trains_like_eager(mode):
    config = torchair.CompilerConfig()
    config.mode = mode
    compiled = train(MLP, "npu", compile_kwargs={"backend": torchair.get_npu_backend(compiler_config=config)}, steps=4)
    eager = train(MLP, "npu", steps=4)
    assert compiled[0] == pytest.approx(eager[0], rel=1e-5, abs=1e-6)
    for a, b in zip(compiled[1], eager[1], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_graph_dump_writes_the_fx_graph(tmp_path):
    config = torchair.CompilerConfig()
    config.debug.graph_dump.type = "py"
    config.debug.graph_dump.path = str(tmp_path)
    model = MLP().npu()
    with torch.no_grad():
        torch.compile(model, backend=torchair.get_npu_backend(compiler_config=config))(torch.randn(2, 16, device="npu"))
    (dump,) = list(tmp_path.iterdir())
    assert dump.name.startswith("dynamo_forward_") and "torch.ops.aten.addmm" in dump.read_text()
    with pytest.raises(TypeError, match="compiler_config must be a torchair.CompilerConfig"):
        torchair.get_compiler(compiler_config={"mode": "max-autotune"})


def test_dynamo_export_saves_an_exported_program(tmp_path):
    model = MLP().npu()
    x = torch.randn(2, 16, device="npu")
    path = torchair.dynamo_export(x, model=model, export_path=str(tmp_path), export_name="mlp")
    loaded = torch.export.load(path)
    torch.testing.assert_close(loaded.module()(x), model(x))


def test_inference_helpers_ops_and_scopes(capsys):
    x = torch.arange(10.0, device="npu")
    torchair.inference.set_dim_gears(x, {0: [10, 20]})
    with pytest.raises(ValueError, match="dimension 3 is out of range for a 1-D tensor"):
        torchair.inference.set_dim_gears(x, {3: [2]})
    torchair.ops.npu_print(x, "done", summarize_size=2)
    assert capsys.readouterr().out.strip() == "[0.0, 1.0] ... [8.0, 9.0] (shape [10], torch.float32) done"
    with torchair.scope.npu_stream_switch("s1"), torchair.scope.super_kernel("sk"):
        assert torch.equal(x + 1, torch.arange(1.0, 11.0, device="npu"))
    assert torchair.patch_for_hcom() is None
    model = torch.nn.Linear(32, 32).npu()
    import torch_npu

    assert torch_npu.get_npu_format(torchair.use_internal_format_weight(model).weight) == 29


def test_names_vnpu_does_not_provide_are_refused_clearly():
    with pytest.raises(AttributeError, match="torchair.llm_datadist is not provided by vnpu's torchair"):
        _ = torchair.llm_datadist
