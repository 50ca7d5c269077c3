"""npu_hans_encode / npu_hans_decode: op-plugin's own check (decode(encode(x)) == x for every dtype and reshuff),
the symbol histogram against the exponent bytes counted here, buffers from empty_with_swapped_memory as MindSpeed
passes them, and the buffer checks."""

import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error


def buffers(x, swapped=False):
    n, e = x.numel(), x.element_size()
    make = (lambda size: torch_npu.empty_with_swapped_memory(size, dtype=x.dtype, device=x.device)) if swapped else (
        lambda size: torch.zeros(size, dtype=x.dtype, device=x.device))  # fmt: skip
    return (
        torch.zeros(256, dtype=torch.int32).npu(),
        make([n * (e - 1) // e]),
        torch.zeros(n, dtype=x.dtype).npu(),
        make([n]),
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("reshuff", [False, True])
def test_round_trip_is_exact(dtype, reshuff):
    x = (torch.randn(4096, generator=torch.Generator().manual_seed(0)) * 10).to(dtype).npu()
    pdf, mantissa, fixed, var = torch_npu.npu_hans_encode(x, True, reshuff, out=buffers(x))
    recover = torch.empty_like(x)
    out = torch_npu.npu_hans_decode(mantissa, fixed, var, pdf, reshuff, out=recover)
    assert out.data_ptr() == recover.data_ptr() and torch.equal(
        recover.cpu().view(torch.uint8), x.cpu().view(torch.uint8)
    )


def test_histogram_counts_the_exponent_bytes_and_swapped_buffers_work():
    x = torch.randn(1000, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16).npu()
    pdf, mantissa, fixed, var = torch_npu.npu_hans_encode(x, True, False, out=buffers(x, swapped=True))
    high = x.cpu().view(torch.uint8).reshape(-1, 2)[:, 1].long()
    assert torch.equal(pdf.cpu(), torch.bincount(high, minlength=256).int())
    recover = torch.empty_like(x)
    torch_npu.npu_hans_decode(mantissa, fixed, var, pdf, False, out=recover)
    assert torch.equal(recover.cpu(), x.cpu())


def test_refuses_buffers_that_are_too_small():
    x = torch.randn(64).half().npu()
    pdf, mantissa, fixed, var = buffers(x)
    raises_operator_error(
        lambda: torch_npu.npu_hans_encode(x, True, False, out=(pdf, mantissa, fixed[:10], var)),
        "npu_hans_encode: fixed must hold at least numel (64) elements, got 10",
    )
