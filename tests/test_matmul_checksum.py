"""torch_npu.matmul_checksum: the V-ABFT operator's path when the CANN ships it, else the row-sum check, which
confirms a suspect result by computing it again (and leaves c correct)."""

import pytest
import torch
from error_cases import raises_exactly
from subprocess_helpers import last_line, run_python

import torch_npu
from torch_npu.asd import checksum


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(0)


def _product(m, k, n, dtype=torch.bfloat16):
    a, b = torch.randn(m, k, dtype=dtype).npu(), torch.randn(k, n, dtype=dtype).npu()
    return a, b, a @ b


@pytest.mark.parametrize("shape", [(64, 128, 32), (8, 4096, 16), (1, 7, 3), (4, 16, 32, 8)])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_correct_products_pass(shape, dtype):
    if len(shape) == 4:  # batched: the row-sum check handles any leading dimensions
        a = torch.randn(shape[0], shape[1], shape[2], dtype=dtype).npu()
        b = torch.randn(shape[0], shape[2], shape[3], dtype=dtype).npu()
        c = a @ b
    else:
        a, b, c = _product(*shape, dtype=dtype)
    flagged = torch_npu.matmul_checksum(a, b, c)
    assert flagged.device.type == "npu" and flagged.dtype == torch.bool and flagged.dim() == 0
    assert not flagged.item()


def test_a_corrupt_row_is_reported_and_c_is_recomputed():
    a, b, c = _product(64, 128, 32)
    correct = c.clone()
    c[5, :] += 100.0
    assert torch_npu.matmul_checksum(a, b, c).item()
    assert torch.equal(c, correct)


def test_mixed_and_lower_precision_results_pass():
    a, b = torch.randn(8, 16).npu(), torch.randn(16, 8, dtype=torch.bfloat16).npu()
    assert not torch_npu.matmul_checksum(a, b, (a @ b.float()).bfloat16()).item()
    a, b = torch.randn(8, 64).npu(), torch.randn(64, 8).npu()
    assert not torch_npu.matmul_checksum(a, b, (a @ b).bfloat16()).item()


def test_inputs_are_checked_with_torch_npus_errors():
    a, b, c = _product(8, 16, 8)
    raises_exactly(
        lambda: torch_npu.matmul_checksum(a.cpu(), b, c),
        TypeError,
        "tensor should be torch.Tensor, and device type should be npu",
    )
    raises_exactly(
        lambda: torch_npu.matmul_checksum(a.half(), b, c),
        TypeError,
        "matmul_checksum only supports bfloat16 and float32, but got a.dtype=torch.float16, "
        "b.dtype=torch.bfloat16, c.dtype=torch.bfloat16",
    )


def test_the_abft_contract_and_its_absence_here():
    a, b, c = _product(64, 128, 32)
    assert checksum._abft_path_applicable(a, b, c)
    assert checksum._abft_path_applicable(a, b, c.float())  # float32 c over bfloat16 inputs
    assert not checksum._abft_path_applicable(a.unsqueeze(0), b.unsqueeze(0), c.unsqueeze(0))
    assert not checksum._abft_path_applicable(a.float(), b, c)
    assert not checksum._abft_path_applicable(a.float(), b.float(), c)  # c below the inputs' precision
    assert not checksum._abft_path_applicable(a, b[:32], c)
    assert checksum._npu_matmul_abft_verify_available() is False  # no CANN vendor operator on vnpu
    assert checksum._abft_available_cache is False


ABFT = """
    import json, torch, torch_npu
    from torch_npu.asd import checksum
    lib = torch.library.Library("npu", "FRAGMENT")
    lib.define("_npu_matmul_abft_verify(Tensor a, Tensor b, Tensor c, Tensor weight, *, float e_max) -> Tensor")
    calls = []

    def verify(a, b, c, weight, *, e_max):  # a reference: one segment, a set bit per row within e_max
        calls.append((a.dtype, c.dtype, e_max))
        good = ((c - a.float() @ b.float()).abs().amax(dim=1) <= 1e-2 * (1 + c.abs().amax(dim=1))).to(torch.uint8)
        rows = torch.nn.functional.pad(good, (0, (-good.numel()) % 8)).view(-1, 8)
        return (rows * (2 ** torch.arange(8, device=rows.device, dtype=torch.uint8))).sum(dim=1).to(torch.uint8)

    lib.impl("_npu_matmul_abft_verify", verify, "CompositeExplicitAutograd")
    torch.manual_seed(0)
    a, b = torch.randn(12, 64, dtype=torch.bfloat16).npu(), torch.randn(64, 16, dtype=torch.bfloat16).npu()
    c = a @ b
    result = {"available": checksum._npu_matmul_abft_verify_available(), "clean": torch_npu.matmul_checksum(a, b, c).item()}
    c[11] += 10.0  # the last row, in the partial second group of 8
    result["corrupt"] = torch_npu.matmul_checksum(a, b, c).item()
    result["calls"] = [[str(x) for x in call] for call in calls]
    print(json.dumps(result))
"""


def test_the_abft_operator_is_used_when_the_cann_has_it():
    import json

    got = json.loads(last_line(run_python(ABFT)))
    assert got["available"] and not got["clean"] and got["corrupt"]
    # the probe, then the two checks: bfloat16 inputs, c in float32, bfloat16's error bound
    assert got["calls"][1:] == [["torch.bfloat16", "torch.float32", "0.001"]] * 2
