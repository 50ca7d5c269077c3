"""Operators with a backward keep nothing alive after the step: repeated forward + backward steps end at the same
npu memory (an output kept as a ctx attribute would form a cycle with its autograd node and leak every step)."""

import gc

import pytest
import torch

import torch_npu


def _q():
    return torch.randn(1, 2, 8, 16).npu().requires_grad_(True)


STEPS = {
    "npu_fusion_attention": lambda q: torch_npu.npu_fusion_attention(q, q, q, 2, "BNSD", scale=0.25)[0],
    "npu_fusion_attention_v2": lambda q: torch_npu.npu_fusion_attention_v2(q, q, q, 2, "BNSD", scale=0.25)[0],
    "npu_rms_norm": lambda q: torch_npu.npu_rms_norm(q, torch.ones(16, device="npu"))[0],
    "npu_rotary_mul": lambda q: torch_npu.npu_rotary_mul(
        q, torch.ones(1, 1, 8, 16).npu(), torch.zeros(1, 1, 8, 16).npu()
    ),
    "npu_swiglu": lambda q: torch_npu.npu_swiglu(q),
}


@pytest.mark.parametrize("name", sorted(STEPS))
def test_repeated_training_steps_end_at_the_same_memory(name):
    q = _q()

    def step():
        STEPS[name](q).float().sum().backward()
        gc.collect()
        return torch.npu.memory_allocated()

    step()  # the first step allocates q.grad
    after = [step() for _ in range(3)]
    assert after[0] == after[1] == after[2], after
