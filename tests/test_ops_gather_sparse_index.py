"""npu_gather_sparse_index: an embedding lookup of table rows (op-plugin's golden function is
torch.nn.Embedding), forward and backward, for index tensors of any rank."""

import pytest
import torch
import torch.nn.functional as F
from error_cases import raises_operator_error
from op_check import check_op

import torch_npu

torch.manual_seed(0)


@pytest.mark.parametrize("index_shape", [(7,), (3, 4), (2, 2, 3)])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_gather_sparse_index_is_an_embedding_lookup(index_shape, index_dtype):
    table = torch.randn(12, 5)
    index = torch.randint(0, 12, index_shape, dtype=index_dtype)  # repeated rows accumulate in the gradient
    check_op(
        torch_npu.npu_gather_sparse_index,
        (table, index),
        lambda t, i: F.embedding(i.long(), t),
        atol=0,
        rtol=0,
        grad=(0,),
    )


def test_gather_sparse_index_needs_a_2d_table():
    raises_operator_error(
        lambda: torch_npu.npu_gather_sparse_index(
            torch.randn(2, 3, 4, device="npu"), torch.zeros(2, dtype=torch.long, device="npu")
        ),
        "npu_gather_sparse_index: input must be 2-D [num_embeddings, embedding_dim], got 3-D",
    )
