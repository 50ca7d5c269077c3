"""transformers' Ascend path: with attn_implementation="flash_attention_2" on npu, transformers calls
torch_npu.npu_fusion_attention (transformers/integrations/npu_flash_attention.py). A small Llama built
from a config (nothing downloaded) must match its eager attention on the CPU."""

import copy

import pytest
import torch


@pytest.fixture(scope="module")
def transformers():
    return pytest.importorskip("transformers", reason="transformers is not installed (make test installs it)")


def _models(transformers, **config):
    cfg = transformers.LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        **config,
    )
    torch.manual_seed(0)
    cpu = transformers.LlamaForCausalLM._from_config(copy.deepcopy(cfg), attn_implementation="eager").eval()
    npu = transformers.LlamaForCausalLM._from_config(copy.deepcopy(cfg), attn_implementation="flash_attention_2")
    npu.load_state_dict(cpu.state_dict())
    return cpu, npu.npu().eval()


def test_flash_attention_2_on_npu_calls_npu_fusion_attention_and_matches_cpu_eager(transformers, monkeypatch):
    from transformers.integrations import npu_flash_attention

    cpu, npu = _models(transformers)
    calls = []
    real = npu_flash_attention.npu_fusion_attention

    def counting(*args, **kwargs):
        calls.append(kwargs.get("sparse_mode", 0))
        return real(*args, **kwargs)

    monkeypatch.setattr(npu_flash_attention, "npu_fusion_attention", counting)
    ids = torch.randint(0, 128, (2, 16))
    with torch.no_grad():
        want = cpu(ids).logits
        got = npu(ids.npu()).logits.cpu()
    assert calls and all(mode == 3 for mode in calls)  # causal, bottom-right aligned
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


def test_flash_attention_2_with_padding_uses_varlen_tnd(transformers):
    cpu, npu = _models(transformers)
    ids = torch.randint(0, 128, (2, 10))
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, :3] = 0  # left padding
    with torch.no_grad():
        want = cpu(ids, attention_mask=mask).logits
        got = npu(ids.npu(), attention_mask=mask.npu()).logits.cpu()
    keep = mask.bool()
    torch.testing.assert_close(got[keep], want[keep], atol=1e-5, rtol=1e-4)


def test_training_step_matches_cpu(transformers):
    cpu, npu = _models(transformers)
    cpu.train()
    npu.train()
    ids = torch.randint(0, 128, (2, 12))
    loss_cpu = cpu(ids, labels=ids).loss
    loss_npu = npu(ids.npu(), labels=ids.npu()).loss
    loss_cpu.backward()
    loss_npu.backward()
    torch.testing.assert_close(loss_npu.detach().cpu(), loss_cpu.detach(), atol=1e-5, rtol=1e-5)
    for (name, p), q in zip(cpu.named_parameters(), npu.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, atol=1e-5, rtol=1e-4, msg=lambda m, name=name: f"{name}: {m}")
