"""Card-only operators: defined with torch_npu's schemas, each call (eager, and under FakeTensor / compile)
raises saying what the card does and why vnpu cannot; torch_npu._afd binds the AFD schedulers."""

import sys

import pytest
import torch

import torch_npu
from torch_npu.ops.card_only import CARD_ONLY


def _one_line(err):
    return str(err).splitlines()[0]


CALLS = {
    "ffn_worker_scheduler": lambda: torch_npu.ffn_worker_scheduler(torch.zeros(1024, dtype=torch.int8).npu()),
    "attention_worker_scheduler_": lambda: torch_npu.attention_worker_scheduler_(torch.zeros(1024, dtype=torch.int8).npu()),
    "npu_attention_worker_combine": lambda: torch_npu.npu_attention_worker_combine(
        torch.zeros(1024, dtype=torch.int8).npu(), torch.ones(2).npu(), torch.zeros(1, dtype=torch.int32).npu(), 8
    ),
    "obfuscation_initialize": lambda: torch_npu.obfuscation_initialize(16, 0, 1),
    "obfuscation_calculate": lambda: torch_npu.obfuscation_calculate(torch.zeros(1).npu(), torch.ones(2).npu(), torch.ones(1).npu()),
    "npu_matmul_compress_dequant": lambda: torch_npu.npu_matmul_compress_dequant(
        torch.zeros(2, 8, dtype=torch.int8).npu(), torch.zeros(16, dtype=torch.int8).npu(),
        torch.zeros(8, dtype=torch.int8).npu(), torch.zeros(1, 2, dtype=torch.int32).npu(), torch.ones(1, 2).npu()
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CALLS))
def test_calls_raise_with_the_reason(name):
    with pytest.raises(RuntimeError) as info:
        CALLS[name]()
    assert _one_line(info.value) == f"{name} runs only on an Ascend card: {CARD_ONLY[name]}."
    assert "ERR00007 PTA feature not supported" in str(info.value)


def test_tracing_refuses_too():
    torch._dynamo.reset()
    compiled = torch.compile(lambda t: torch_npu.ffn_worker_scheduler(t), backend="aot_eager", fullgraph=True)
    with pytest.raises(Exception) as info:
        compiled(torch.zeros(1024, dtype=torch.int8).npu())
    assert "ffn_worker_scheduler runs only on an Ascend card" in str(info.value)


def test_afd_module_binds_the_schedulers():
    assert "torch_npu._afd" in sys.modules and "torch_npu._C._afd" not in sys.modules
    assert not hasattr(torch_npu._C, "_afd")
    for name in (
        "attention_worker_scheduler_",
        "attention_worker_scheduler",
        "ffn_worker_scheduler_",
        "ffn_worker_scheduler",
    ):
        assert getattr(torch_npu._afd, name) is getattr(torch.ops.npu, name)
    with pytest.raises(RuntimeError) as info:
        torch_npu._afd.create_schedule_context_holder(0, 2, 3, 6, 9, 288, 7680, 14336)
    assert _one_line(info.value).startswith("create_schedule_context_holder runs only on an Ascend card: Attention-FFN")
