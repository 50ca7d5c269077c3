"""diffusers' Ascend path. diffusers detects torch_npu by its installed distribution and then calls
torch_npu.npu_geglu (GEGLU), torch_npu.npu_rms_norm (RMSNorm) and, with the "_native_npu" attention
backend, torch_npu.npu_fusion_attention; it computes Flux's rotary frequencies in float32 on npu (the
card has no float64 there). Small models built from configs (nothing downloaded) on npu must equal
diffusers' own path on the CPU computing what the card computes: GEGLU with the tanh GELU the npu
call selects (approximate=1), the rotary frequencies in float32."""

import contextlib
import copy
import importlib.metadata
from unittest import mock

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import torch_npu


@pytest.fixture(scope="module")
def diffusers():
    return pytest.importorskip("diffusers", reason="diffusers is not installed (make test installs it)")


def test_torch_npu_is_an_installed_distribution_with_a_pep440_version():
    from packaging.version import Version

    assert importlib.metadata.version("torch_npu") == torch_npu.__version__
    assert importlib.metadata.version("torch-npu") == torch_npu.__version__
    assert importlib.metadata.distribution("Torch_NPU").metadata["Name"] == "torch_npu"
    assert importlib.metadata.distribution("torch_npu").requires == [f"torch=={torch.__version__.split('+')[0]}"]
    assert "torch_npu" in importlib.metadata.packages_distributions()["torch_npu"]
    version = Version(torch_npu.__version__)
    assert version.public == "2.13.0" and version.local.startswith("vnpu.") and version >= Version("2.1.0")
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("torch_npu_missing")


def test_diffusers_sees_torch_npu(diffusers):
    from diffusers.utils import is_torch_npu_available

    assert is_torch_npu_available()


@contextlib.contextmanager
def _card_semantics_on_cpu():
    """diffusers' non-Ascend path, computing what its Ascend path computes on the card."""
    import diffusers.models.activations as activations
    import diffusers.models.normalization as normalization
    import diffusers.models.transformers.transformer_flux as transformer_flux

    def float32_rope(dtype, device):
        return torch.float32 if dtype == torch.float64 else dtype

    with (
        mock.patch.object(activations, "is_torch_npu_available", lambda: False),
        mock.patch.object(normalization, "is_torch_npu_available", lambda: False),
        mock.patch.object(activations.GEGLU, "gelu", lambda self, gate: F.gelu(gate, approximate="tanh")),
        mock.patch.object(transformer_flux, "maybe_adjust_dtype_for_device", float32_rope),
    ):
        yield


def _train_step(model, device, inputs, reference):
    model = copy.deepcopy(model).to(device)
    with _card_semantics_on_cpu() if reference else contextlib.nullcontext():
        out = model(**{k: v.to(device) if torch.is_tensor(v) else v for k, v in inputs.items()}).sample
        out.square().mean().backward()
    return out.detach().cpu(), [p.grad.cpu() for p in model.parameters()]


def _assert_equal(reference, npu):
    assert torch.equal(reference[0], npu[0])
    assert len(reference[1]) == len(npu[1]) and all(map(torch.equal, reference[1], npu[1]))


def _counting(monkeypatch, name, module=torch_npu):
    """The calls of module.name from now on, as (device of the first argument, input_layout if given)."""
    calls = []
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append((args[0].device.type, kwargs.get("input_layout")))
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


# The small UNets' shape: two levels of 32 and 64 channels, one layer each, groups of 8.
_UNET_SHAPE = dict(sample_size=16, layers_per_block=1, block_out_channels=(32, 64), norm_num_groups=8)


def _unet(diffusers):
    torch.manual_seed(0)
    model = diffusers.UNet2DConditionModel(
        **_UNET_SHAPE,
        in_channels=4,
        out_channels=4,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32,
        attention_head_dim=8,
    )
    inputs = dict(
        sample=torch.randn(2, 4, 16, 16), timestep=torch.tensor([10, 500]), encoder_hidden_states=torch.randn(2, 7, 32)
    )
    return model, inputs


def _flux(diffusers):
    torch.manual_seed(0)
    model = diffusers.FluxTransformer2DModel(
        patch_size=1,
        in_channels=8,
        num_layers=1,
        num_single_layers=1,
        attention_head_dim=16,
        num_attention_heads=2,
        joint_attention_dim=32,
        pooled_projection_dim=32,
        axes_dims_rope=(4, 6, 6),
    )
    inputs = dict(
        hidden_states=torch.randn(1, 16, 8),
        encoder_hidden_states=torch.randn(1, 6, 32),
        pooled_projections=torch.randn(1, 32),
        timestep=torch.tensor([0.5]),
        img_ids=torch.randn(16, 3),
        txt_ids=torch.zeros(6, 3),
    )
    return model, inputs


def test_unet_with_npu_geglu_trains_as_its_cpu_path(diffusers, monkeypatch):
    model, inputs = _unet(diffusers)
    reference = _train_step(model, "cpu", inputs, reference=True)
    calls = _counting(monkeypatch, "npu_geglu")
    _assert_equal(reference, _train_step(model, "npu", inputs, reference=False))
    assert calls == [("npu", None)] * 4  # the GEGLU of each transformer block: down 1, middle 1, up 2


def test_a_cpu_model_reaching_npu_geglu_fails_as_with_torch_npu_installed(diffusers):
    model, inputs = _unet(diffusers)
    with pytest.raises(NotImplementedError) as error:
        model(**inputs)
    assert str(error.value).startswith(
        "Could not run 'npu::npu_geglu' with arguments from the 'CPU' backend: torch_npu operators take npu tensors "
        "(move the inputs with .npu())"
    )


def _sd3(diffusers):
    torch.manual_seed(0)
    model = diffusers.SD3Transformer2DModel(
        sample_size=8,
        patch_size=2,
        in_channels=4,
        num_layers=2,
        attention_head_dim=8,
        num_attention_heads=2,
        joint_attention_dim=32,
        caption_projection_dim=16,
        pooled_projection_dim=32,
        out_channels=4,
        qk_norm="rms_norm",
        pos_embed_max_size=16,
    )
    inputs = dict(
        hidden_states=torch.randn(1, 4, 8, 8),
        encoder_hidden_states=torch.randn(1, 6, 32),
        pooled_projections=torch.randn(1, 32),
        timestep=torch.tensor([10]),
    )
    return model, inputs


def test_sd3_with_npu_rms_norm_trains_as_its_cpu_path(diffusers, monkeypatch):
    model, inputs = _sd3(diffusers)
    reference = _train_step(model, "cpu", inputs, reference=True)
    calls = _counting(monkeypatch, "npu_rms_norm")
    _assert_equal(reference, _train_step(model, "npu", inputs, reference=False))
    assert calls == [("npu", None)] * 8  # q and k of the image and the text stream in each of the two joint blocks


def test_flux_with_float32_rotary_frequencies_trains_as_its_cpu_path(diffusers):
    model, inputs = _flux(diffusers)
    _assert_equal(_train_step(model, "cpu", inputs, reference=True), _train_step(model, "npu", inputs, reference=False))


def test_flux_with_the_native_npu_attention_backend_calls_npu_fusion_attention(diffusers, monkeypatch):
    import diffusers.models.attention_dispatch as attention_dispatch

    model, inputs = _flux(diffusers)
    reference = _train_step(model, "cpu", inputs, reference=True)
    npu_model = copy.deepcopy(model)
    npu_model.set_attention_backend("_native_npu")
    calls = _counting(monkeypatch, "npu_fusion_attention", module=attention_dispatch)
    out, grads = _train_step(npu_model, "npu", inputs, reference=False)
    assert calls == [("npu", "BSND")] * 2  # the double-stream and the single-stream block
    # the fused attention is another kernel than SDPA's math: equal to rounding
    torch.testing.assert_close(out, reference[0], rtol=1e-5, atol=1e-6)
    for got, want in zip(grads, reference[1]):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


def _ddim_pipeline(diffusers):
    torch.manual_seed(0)
    unet = diffusers.UNet2DModel(
        **_UNET_SHAPE,
        in_channels=3,
        out_channels=3,
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
    )
    return diffusers.DDPMPipeline(unet=unet, scheduler=diffusers.DDIMScheduler(num_train_timesteps=50))


def _sample(pipe):
    generator = torch.Generator("cpu").manual_seed(0)
    return pipe(batch_size=2, generator=generator, num_inference_steps=4, output_type="np").images


def test_a_pipeline_on_npu_and_with_model_offload_samples_the_cpu_images(diffusers):
    cpu = _sample(_ddim_pipeline(diffusers))
    pipe = _ddim_pipeline(diffusers).to("npu")
    assert pipe.device == torch.device("npu", 0)
    np.testing.assert_array_equal(_sample(pipe), cpu)

    offloaded = _ddim_pipeline(diffusers)
    offloaded.enable_model_cpu_offload(device="npu")
    before = torch.npu.memory_allocated()
    np.testing.assert_array_equal(_sample(offloaded), cpu)
    assert offloaded.unet.device.type == "cpu" and torch.npu.memory_allocated() == before


def test_enable_npu_flash_attention_runs_bf16_attention_through_npu_fusion_attention(diffusers, monkeypatch):
    model, inputs = _unet(diffusers)
    model = model.to(torch.bfloat16)
    inputs = {k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in inputs.items()}
    sdpa = copy.deepcopy(model).npu()
    fused = copy.deepcopy(model).npu()
    fused.enable_npu_flash_attention()
    calls = _counting(monkeypatch, "npu_fusion_attention")
    npu_inputs = {k: v.npu() for k, v in inputs.items()}
    with torch.no_grad():
        want = sdpa(**npu_inputs).sample.float().cpu()
        assert calls == []
        got = fused(**npu_inputs).sample.float().cpu()
    assert calls == [("npu", "BNSD")] * 8  # self- and cross-attention of the four transformer blocks
    torch.testing.assert_close(got, want, rtol=0.05, atol=0.05)  # bf16 fused attention vs bf16 SDPA
