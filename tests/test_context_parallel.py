"""Context parallelism on npu device meshes: PyTorch's context_parallel with the attention of npu tensors computed
as a ring over the ranks (tests/context_parallel_cases.py holds what each rank checks)."""

import pytest
from test_distributed import _all_ok, launch

import torch_npu
from torch_npu.distributed.tensor import experimental


@pytest.mark.parametrize("world", [2, 4])
def test_sdpa_inside_context_parallel_equals_attention_over_the_whole_sequence(world):
    _all_ok(launch("context_parallel_sdpa", world))


def test_a_tensor_parallel_by_context_parallel_mesh_runs_the_ring_over_the_context_parallel_ranks():
    _all_ok(launch("context_parallel_tp_cp_mesh", 4))


def test_npu_fusion_attention_on_sequence_sharded_dtensors_runs_as_a_ring():
    _all_ok(launch("context_parallel_fusion_attention", 2))


def test_what_the_ring_cannot_compute_is_refused_by_name():
    _all_ok(launch("context_parallel_refusals", 2))


def test_context_parallel_is_pytorchs_api_under_torch_npus_name():
    import inspect

    from torch.distributed.tensor.experimental import context_parallel

    assert experimental.__all__ == ["context_parallel"]
    assert experimental.context_parallel.__module__ == "torch_npu.distributed.tensor.experimental"
    assert inspect.signature(experimental.context_parallel) == inspect.signature(context_parallel)
    assert torch_npu.distributed.tensor.experimental is experimental
