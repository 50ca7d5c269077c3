"""Sparse CSR tensors on npu, as torch_npu has them: built on the device, their structure readable,
and the two reductions torch_npu runs on the CPU warning once (or refused under
TORCH_NPU_FALLBACK_CPU_DISABLE=1, read once per process, hence the fresh interpreters)."""

import pytest
import torch
from subprocess_helpers import run_python

CSR = (
    "torch.sparse_csr_tensor(torch.tensor([0, 2, 4]), torch.tensor([0, 1, 0, 1]), "
    "torch.tensor([1.0, 2.0, 3.0, 4.0]), size=(2, 2), device={device!r})"
)


def csr(device):
    return eval(CSR.format(device=device))


def test_a_csr_tensor_built_on_npu_reads_like_the_cpu_one():
    on_npu, on_cpu = csr("npu"), csr("cpu")
    assert on_npu.layout == torch.sparse_csr and on_npu.device.type == "npu"
    assert on_npu._nnz() == on_cpu._nnz() == 4
    for accessor in ("crow_indices", "col_indices", "values"):
        member = getattr(on_npu, accessor)()
        assert member.device.type == "npu" and torch.equal(member.cpu(), getattr(on_cpu, accessor)())
    assert torch.equal(on_npu.to_dense().cpu(), on_cpu.to_dense())
    assert torch.equal(on_npu.cpu().to_dense(), on_cpu.to_dense())
    assert torch.equal(on_cpu.to("npu").to_dense().cpu(), on_cpu.to_dense())


REDUCE = """
import torch, torch_npu
value = {csr}
for _ in range(2):
    result = torch.ops.aten._sparse_csr_{op}.dim_dtype(value, [1], True, dtype=None)
    assert result.device.type == "npu"
    print(result.cpu().to_dense().flatten().tolist())
"""


@pytest.mark.parametrize("op,expected", [("sum", "[3.0, 7.0]"), ("prod", "[2.0, 12.0]")])
def test_csr_reductions_fall_back_to_the_cpu_with_one_warning(op, expected):
    done = run_python(REDUCE.format(csr=CSR.format(device="npu"), op=op))
    assert done.stdout.strip().splitlines() == [expected] * 2
    warning = (
        "CPU fallback is allowed because TORCH_NPU_FALLBACK_CPU_DISABLE=0. Since the NPU interface does not support "
        f"operator 'aten::_sparse_csr_{op}.dim_dtype', the operator will fall back to CPU."
    )
    assert done.stderr.count(warning) == 1


@pytest.mark.parametrize("op", ["sum", "prod"])
def test_csr_reductions_are_refused_when_cpu_fallback_is_disabled(op):
    done = run_python(
        REDUCE.format(csr=CSR.format(device="npu"), op=op), env={"TORCH_NPU_FALLBACK_CPU_DISABLE": "1"}, check=False
    )
    assert done.returncode != 0 and "will fall back to CPU" not in done.stderr
    assert (
        f"RuntimeError: The operator 'aten::_sparse_csr_{op}.dim_dtype' would execute its main computation on CPU "
        "through an explicit CPU fallback kernel, because torch_npu currently provides only a CPU implementation for "
        "this Sparse CSR reduction, but CPU fallback is disabled by TORCH_NPU_FALLBACK_CPU_DISABLE=1."
    ) in done.stderr
    assert "ERR01007 OPS feature not supported" in done.stderr


def test_arithmetic_on_a_csr_tensor_is_refused_clearly():
    with pytest.raises(RuntimeError, match="unsupported tensor layout: SparseCsr"):
        csr("npu") + csr("npu")
