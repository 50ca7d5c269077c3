"""torch_npu.testing: the harness torch_npu's test files import runs such files unchanged."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

import torch_npu
from torch_npu.testing.common_utils import (
    Baseline,
    create_common_tensor,
    create_dtype_tensor,
    freeze_rng_state,
    iter_indices,
)
from torch_npu.testing.common_utils import test_2args_broadcast as broadcasts_like_cpu
from torch_npu.testing.testcase import TestCase

STYLE_DIR = os.path.join(os.path.dirname(__file__), "torch_npu_style")


def _unittest_report(name):
    """The verbose unittest report of a torch_npu-style test file run as its authors run it; it must pass."""
    proc = subprocess.run(
        [sys.executable, os.path.join(STYLE_DIR, name), "-v"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


def test_a_torch_npu_style_test_file_runs_unchanged():
    report = _unittest_report("test_abs_style.py")
    assert "Ran 10 tests" in report
    assert re.search(r"test_add_float16_29 \(.*\) \.\.\. ok", report)
    assert re.search(r"test_cast_int32 \(.*\) \.\.\. ok", report)  # no device parameter: dtype only
    assert re.search(r"test_only_on_310p \(.*\) \.\.\. skipped", report)


def test_a_test_file_of_the_private_harness_layout_runs_unchanged_with_dtensors_on_two_npus():
    report = _unittest_report("test_private_harness_style.py")
    assert "Ran 4 tests" in report
    assert re.search(r"test_first_two_rows_and_columns_int8 \(.*\) \.\.\. ok", report)  # torch_npu.testing._decorator
    assert re.search(r"test_cast_to_half \(.*\) \.\.\. ok", report)
    # the ranks log their start between the test's name and its verdict
    assert re.search(r"test_row_sum_of_a_sharded_tensor \(.*\) \.\.\.(.|\n)*?^ok$", report, re.MULTILINE)
    assert "skipped" not in report


class _Probe(TestCase):
    def runTest(self):
        pass


def test_torch_npu_testcase_is_expecttests_and_compares_storages_and_iterables():
    import expecttest

    assert issubclass(TestCase, expecttest.TestCase)
    t = _Probe()
    t.assertEqual(torch.tensor([1.0, 2.0], device="npu").untyped_storage(), torch.tensor([1.0, 2.0]).untyped_storage())
    with pytest.raises(AssertionError):
        t.assertEqual(
            torch.tensor([1.0, 3.0], device="npu").untyped_storage(), torch.tensor([1.0, 2.0]).untyped_storage()
        )
    t.assertEqual(torch.Size([2, 3]), (2, 3))
    t.assertEqual(range(3), [0, 1, 2])
    t.assertEqual((i for i in range(2)), torch.tensor([0, 1]))
    with pytest.raises(AssertionError):
        t.assertEqual(range(3), [0, 1, 3])
    t.assertEqual({"a": torch.ones(2)}, {"a": torch.ones(2, device="npu")})


def test_assert_rtol_equal_tolerances():
    t = _Probe()
    t.assertRtolEqual(np.array([1.0, 2.0], dtype=np.float32), np.array([1.00001, 2.0], dtype=np.float32))
    with pytest.raises(AssertionError, match="result error"):
        t.assertRtolEqual(np.array([1.0, 2.0], dtype=np.float32), np.array([1.1, 2.0], dtype=np.float32))
    t.assertRtolEqual(np.array([1.0], dtype=np.float16), np.array([1.0005], dtype=np.float16))
    with pytest.raises(AssertionError, match="shape error"):
        t.assertRtolEqual(np.zeros(2), np.zeros(3))
    with pytest.raises(AssertionError, match="dtype error"):
        t.assertRtolEqual(np.zeros(2, dtype=np.float32), np.zeros(2, dtype=np.float16))
    t.assertRtolEqual(torch.tensor([float("nan")]), torch.tensor([float("nan")]))
    t.assertRtolEqual(torch.ones(2, dtype=torch.bfloat16, device="npu"), torch.ones(2, dtype=torch.bfloat16))
    # torch_npu's rule counts the two bounds apart: one element off absolutely (1000 vs 1000.05) and another off
    # relatively (1e-6 vs 2e-6) fail together, though neither element misses both bounds.
    with pytest.raises(AssertionError, match="1 of 2 elements differ by more than 0.0001, 1 relatively"):
        t.assertRtolEqual(np.array([1000.0, 1e-6], dtype=np.float32), np.array([1000.05, 2e-6], dtype=np.float32))
    t.assertRtolEqual(np.array([1000.0, 1.0], dtype=np.float32), np.array([1000.05, 1.0], dtype=np.float32))
    with pytest.raises(AssertionError, match="NaNs in different places"):
        t.assertRtolEqual(np.array([float("nan"), 1.0]), np.array([1.0, 1.0]))


def test_assert_rtol_equal_compares_an_operators_outputs_pairwise():
    t = TestCase()
    x = torch.randn(4, 8, 6, 6)
    expected = list(torch.ops.aten.native_group_norm(x, None, None, 4, 8, 36, 2, 1e-5))
    got = torch_npu.npu_group_norm_silu(x.npu(), None, None, 2, 1e-5)
    expected[0] = torch.nn.functional.silu(expected[0])
    t.assertRtolEqual(expected, got)
    with pytest.raises(AssertionError, match="result error"):
        t.assertRtolEqual(expected, (got[0], got[1] + 1, got[2]))
    t.assertRtolEqual(torch.tensor([1.0, 2.0]), [1.0, 2.0])
    t.assertRtolEqual(torch.tensor([1.0, 2.0], dtype=torch.float16), torch.tensor([1.0, 2.0]), auto_trans_dtype=True)
    with pytest.raises(AssertionError, match="dtype error"):
        t.assertRtolEqual(torch.tensor([1.0, 2.0], dtype=torch.float16), torch.tensor([1.0, 2.0]))


def test_assert_equal_with_prec_and_warn_helpers():
    t = _Probe()
    t.assertEqual(torch.ones(3), torch.ones(3, device="npu") + 1e-6, prec=1e-5)
    with pytest.raises(AssertionError):
        t.assertEqual(torch.ones(3), torch.zeros(3))
    t.assertNotEqual(torch.ones(3), torch.zeros(3))
    t.assertEqual([1, 2], [1, 2])
    import warnings

    t.assertWarns(lambda: warnings.warn("x"))
    t.assertNotWarn(lambda: None)
    with t.assertWarns(UserWarning):
        warnings.warn("context manager form still works")


def test_create_tensors_pair_cpu_and_npu():
    cpu, npu = create_common_tensor([np.float32, 29, [4, 5]], -2, 2)
    import torch_npu

    assert torch.equal(cpu, npu.cpu()) and torch_npu.get_npu_format(npu) == 29
    assert float(cpu.min()) >= -2 and float(cpu.max()) <= 2
    cpu_i, npu_i = create_dtype_tensor([10], torch.int32, no_zero=True)
    assert bool((cpu_i != 0).all()) and torch.equal(cpu_i, npu_i.cpu())


def test_baseline_file_round_trip(tmp_path):
    path = str(tmp_path / "base.json")
    b = Baseline(path)
    b.set_baseline("op_add", 1.5)
    b.save_baseline()
    assert Baseline(path).get_baseline("op_add") == 1.5


def test_freeze_rng_state_and_helpers():
    with freeze_rng_state():
        a = torch.randn(3, device="npu")
    b = torch.randn(3, device="npu")
    assert torch.equal(a.cpu(), b.cpu())
    assert list(iter_indices(torch.empty(2, 2))) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert broadcasts_like_cpu(torch.add)


def test_common_distributed_helpers(tmp_path, monkeypatch):
    """torch_npu's helpers: skips by device count, process groups from a file store for MultiProcessTestCase-style
    cases (hccl with enough npus, gloo otherwise), their errors."""
    import unittest

    import torch.distributed as dist

    from torch_npu.testing.common_distributed import TEST_SKIPS, init_pg, skipIfUnsupportMultiNPU, with_comms

    class Case:
        rank = 0

        def __init__(self, world_size):
            self.world_size, self.file_name = world_size, str(tmp_path / f"pg{world_size}")

        def destroy_pg(self):
            dist.destroy_process_group()

        @skipIfUnsupportMultiNPU(64)
        def needs_many(self):
            raise AssertionError("must be skipped")

        @with_comms
        def body(self):
            self.seen = (self.device_type, dist.get_backend(), dist.get_world_size(), torch.npu.current_device())

    with pytest.raises(unittest.SkipTest, match="^Multi-NPU 64 condition not satisfied$"):
        Case(1).needs_many()
    assert TEST_SKIPS["multi-npu"] == (75, "Multi-NPU condition not satisfied")
    case = Case(1)
    case.body()
    assert case.seen == ("npu", "hccl", 1, 0) and not dist.is_initialized()
    with pytest.raises(RuntimeError, match="^Backend nccl not supported!$"):
        init_pg("nccl", 1, 0, str(tmp_path / "x"))
    monkeypatch.setattr(torch.npu, "device_count", lambda: 2)
    with pytest.raises(RuntimeError, match="^Need at least 4 ASCEND devices$"):
        init_pg("hccl", 4, 0, str(tmp_path / "y"))
    with pytest.raises(RuntimeError, match="^Test function is None.$"):
        with_comms(None)


def test_common_methods_invocations_samples():
    from torch_npu.testing.common_methods_invocations import (
        sample_inputs_median_custom,
        sample_inputs_normal_tensor_second,
    )

    samples = list(sample_inputs_median_custom(None, "npu", torch.float32, False))
    assert len(samples) == 3 and all(s.input.device.type == "npu" for s in samples)
    normal = list(sample_inputs_normal_tensor_second(None, "npu", torch.float32, False))
    assert all(float(s.args[0].min()) > 0 for s in normal)


def test_skip_decorators_skip_with_their_reason_and_otherwise_run():
    import unittest

    import torch_npu
    from torch_npu.testing.common_utils import (
        SkipIfNoLapack,
        SkipIfNotGteCANNVersion,
        SkipIfNotRegistered,
        SupportedDevices,
    )

    soc = torch_npu._C._soc_profile()["name"]

    @SupportedDevices(["Ascend310P"])
    def only_310p(x):
        return x

    @SkipIfNotGteCANNVersion("99.0.RC1")
    def needs_future_cann():
        raise AssertionError("must be skipped")

    with pytest.raises(unittest.SkipTest) as e:
        only_310p(1)
    assert str(e.value) == f"runs on ['Ascend310P'], this vnpu is {soc}"
    with pytest.raises(unittest.SkipTest) as e:
        needs_future_cann()
    assert str(e.value) == "needs CANN >= 99.0.RC1"
    assert SupportedDevices([soc[:9]])(lambda x: x + 1)(1) == 2
    assert SkipIfNotGteCANNVersion("1.0.RC1")(lambda: "ran")() == "ran"
    assert SkipIfNotRegistered()(lambda: "ran")() == "ran"
    if torch._C.has_lapack:
        assert SkipIfNoLapack()(lambda: "ran")() == "ran"


def test_assert_equal_compares_a_number_with_a_one_element_tensors_item():
    # torch_npu's assertEqual takes the tensor's item against a number (PyTorch's GradScaler tests compare
    # found_inf, a [1] tensor, with 1.0), within the precision; infinities only with allow_inf
    t = _Probe()
    t.assertEqual(torch.full((1,), 1.0, device="npu"), 1.0)
    t.assertEqual(2, torch.tensor([2.000001]))
    with pytest.raises(AssertionError):
        t.assertEqual(torch.zeros(1, device="npu"), 1.0)
    with pytest.raises(AssertionError, match="Expected finite numeric values"):
        t.assertEqual(torch.tensor([float("inf")]), float("inf"))
    t.assertEqual(torch.tensor([float("inf")]), float("inf"), allow_inf=True)
    with pytest.raises(RuntimeError):  # several elements have no item, as in torch_npu
        t.assertEqual(torch.ones(2), 1.0)
