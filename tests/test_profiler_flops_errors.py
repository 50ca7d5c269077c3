"""The FLOPs formulas, registry and hook say exactly what is wrong: a formula's ValueError (which the hook logs and
the call then runs uncounted), the hook's warnings for targets that do not resolve, the registry's error for a
formula registered twice, and the profiler's reset of a non-bool record_flops."""

import logging
import types

import pytest
import torch

import torch_npu
from torch_npu.profiler import _flops_formulas as formulas
from torch_npu.profiler._flops_hook import FlopsHookManager, _resolve_target
from torch_npu.profiler._flops_registry import _npu_flop_registry, register_npu_flop


def t(*shape):
    return types.SimpleNamespace(shape=shape)


def _block_sparse(actual_seq_lengths):
    """One 4 x 4 block of one head of one BNSD item, with the given query lengths."""
    q = t(1, 1, 4, 4)
    return formulas.npu_block_sparse_attention_flops(
        q, q, q, [[[[1]]]], (4, 4), q_input_layout="BNSD", kv_input_layout="BNSD", actual_seq_lengths=actual_seq_lengths
    )


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: formulas.mm_flops(t(4), t(4, 2)), "Matmul FLOPs requires rank >= 2: (4,), (4, 2)"),
        (
            lambda: formulas.matmul_flops(t(3, 2, 4), t(5, 4, 6)),
            "Cannot broadcast matmul batch dimensions: (3,), (5,)",
        ),
        (
            lambda: formulas.npu_transpose_batchmatmul_flops(t(2, 3, 4), t(2, 4, 5), perm_x1=(1, 0)),
            "Permutation (1, 0) does not match tensor shape (2, 3, 4)",
        ),
        (
            lambda: formulas.npu_grouped_matmul_flops(t(6, 3), [t(3, 7), t(3, 11)]),
            "Grouped matmul FLOPs requires group_list for split groups",
        ),
        (
            lambda: formulas.npu_grouped_matmul_flops(t(6, 3), [t(3, 7), t(3, 11)], group_list=[6]),
            "Expected 2 groups, got 1",
        ),
        (
            lambda: formulas.npu_grouped_matmul_flops(t(6, 3), [t(3, 7), t(3, 11)], group_list=[2, 3]),
            "group_list does not match grouped matmul token count",
        ),
        (
            lambda: formulas.npu_grouped_matmul_flops([t(2, 3), t(2, 3)], [t(3, 7), t(3, 7), t(3, 7)]),
            "Grouped matmul FLOPs requires matching groups: 2, 3",
        ),
        (
            lambda: formulas.npu_grouped_matmul_flops(t(6, 3), [t(3, 7), t(3, 11)], group_list=6),
            "Value must be a sequence or expose tolist() returning a sequence",
        ),
        (
            lambda: formulas.npu_fusion_attention_flops(t(1, 4, 30), t(1, 4, 30), t(1, 4, 30), 4, "BSH"),
            "Hidden size 30 must be divisible by the number of heads 4",
        ),
        (
            lambda: formulas.npu_fusion_attention_flops(t(1, 2, 3, 4), t(1, 2, 3, 4), t(1, 2, 3, 4), 2, "NSD"),
            "Invalid layout for FlashAttention input tensor: NSD",
        ),
        (
            lambda: formulas.npu_fusion_attention_flops(
                t(1, 2, 3, 4), t(1, 2, 3, 4), t(1, 2, 3, 4), 2, "BNSD", sparse_mode=4
            ),
            "Unknown FLOPs formula for sparse_mode=4",
        ),
        (
            lambda: formulas.npu_fusion_attention_flops(t(6, 2, 4), t(6, 2, 4), t(6, 2, 4), 2, "TND"),
            "TND layout requires actual_seq_qlen and actual_seq_kvlen",
        ),
        (
            lambda: formulas.npu_fusion_attention_flops(
                t(6, 2, 4), t(6, 2, 4), t(6, 2, 4), 2, "TND", actual_seq_qlen=[3, 3], actual_seq_kvlen=[3, 6]
            ),
            "actual_seq_qlen and actual_seq_kvlen must contain valid cumulative lengths",
        ),
        (lambda: _block_sparse([4, 4]), "Expected 1 sequence lengths, got 2"),
        (lambda: _block_sparse([-1]), "Sequence lengths must be non-negative"),
    ],
)
def test_a_formula_that_cannot_count_says_why(call, message):
    with pytest.raises(ValueError) as error:
        call()
    assert str(error.value) == message


def test_targets_that_do_not_resolve_are_warned_about(caplog):
    with caplog.at_level(logging.WARNING, logger="torch_npu.profiler._flops_hook"):
        assert _resolve_target("torch.mm") == (None, None)
        assert _resolve_target("no_such_module_for_flops:mm") == (None, None)
        assert _resolve_target("torch:no_such.mm") == (None, None)
        FlopsHookManager.install({"missing": (torch, "no_such_function")})
    assert not FlopsHookManager.is_installed()
    assert [r.getMessage() for r in caplog.records] == [
        "Invalid FLOPs target format: torch.mm",
        "Cannot import FLOPs target module: no_such_module_for_flops",
        "Cannot resolve FLOPs target: torch:no_such.mm",
        f"Cannot find FLOPs target {torch}.no_such_function",
    ]


def test_a_program_formula_registered_twice_is_an_error_and_the_later_one_wins(caplog):
    try:
        register_npu_flop(op_name="twice")(lambda: 1)
        with caplog.at_level(logging.ERROR, logger="torch_npu.profiler._flops_registry"):
            second = register_npu_flop(op_name="twice")(lambda: 2)
    finally:
        found = _npu_flop_registry.pop("twice")
    assert found[0] is second
    assert [r.getMessage() for r in caplog.records] == [
        "Duplicate external FLOPs registration for twice. The later registration takes precedence."
    ]


def test_a_non_bool_record_flops_is_reset_with_torch_npus_warning(capsys):
    config = torch_npu.profiler._ExperimentalConfig(record_flops="yes")
    assert config.record_flops is False
    assert "Invalid parameter record_flops, which must be of bool type, reset it to False." in capsys.readouterr().out
