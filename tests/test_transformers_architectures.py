"""transformers' model families, built small from their configs (nothing downloaded), on npu and on the CPU: the
same logits and the same greedy generation. The mixture-of-experts layers count tokens per expert with
torch.histc on int32 ids off the CPU, as they do on CUDA and on a card."""

import copy

import pytest
import torch

LAYERS = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, vocab_size=100)
ARCHITECTURES = {
    "mixtral": dict(LAYERS, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2),
    "qwen3_moe": dict(
        LAYERS, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, head_dim=8
    ),
    "mistral": dict(LAYERS, num_key_value_heads=2, sliding_window=8),
    "gemma": dict(LAYERS, num_key_value_heads=2, head_dim=8),
    "phi3": dict(LAYERS, num_key_value_heads=4, pad_token_id=0),
}


@pytest.fixture(scope="module")
def transformers():
    module = pytest.importorskip("transformers", reason="transformers is not installed (make test installs it)")
    module.logging.set_verbosity_error()
    return module


@pytest.mark.parametrize("name", ARCHITECTURES)
@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_causal_lm_on_npu_computes_and_generates_as_on_cpu(transformers, name, attention):
    config = transformers.AutoConfig.for_model(name, max_position_embeddings=64, **ARCHITECTURES[name])
    torch.manual_seed(0)
    cpu = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attention).eval()
    npu = copy.deepcopy(cpu).npu()
    ids = torch.randint(1, 100, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(npu(input_ids=ids.npu()).logits.cpu(), cpu(input_ids=ids).logits)
        expected = cpu.generate(ids[:, :5], max_new_tokens=6, do_sample=False)
        got = npu.generate(ids[:, :5].npu(), max_new_tokens=6, do_sample=False)
    assert got.device.type == "npu"
    assert torch.equal(got.cpu(), expected)
