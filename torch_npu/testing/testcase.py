"""TestCase and run_tests as torch_npu's tests use them.

assertRtolEqual(x, y, prec, prec16) is torch_npu's tolerance check: an element agrees when its
absolute error or its relative error (error / max(|x|, |y|)) is within `prec` (`prec16` for float16
and bfloat16); the comparison fails when more than size*prec elements disagree. With vnpu the npu
result is normally bit-identical to the CPU's, so these checks pass with zero error.
"""

import math
import os
import random
import re
import sys
import unittest
import warnings
from numbers import Number

import numpy as np
import torch

try:  # torch_npu's TestCase is expecttest's (assertExpectedInline); without expecttest, unittest's
    from expecttest import TestCase as _BaseTestCase
except ImportError:  # pragma: no cover - expecttest is a dependency of vnpu
    _BaseTestCase = unittest.TestCase

__all__ = ["TestCase", "run_tests"]

_SEED = int(os.environ.get("SEED", "666"))


def _to_numpy(value):
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16:
            value = value.float()
        return value.numpy()
    return np.asarray(value)


def _is_sequence(value):
    """Iterables compared element by element: lists, tuples, torch.Size, ranges, generators... (not
    strings, bytes, tensors, arrays or sets, whose order means nothing)."""
    import collections.abc

    return isinstance(value, collections.abc.Iterable) and not isinstance(
        value, (str, bytes, torch.Tensor, np.ndarray, set, frozenset, dict)
    )


def _is_rtol_sequence(value):
    """What assertRtolEqual compares element by element, as torch_npu's does: a list, tuple or torch.Size."""
    import collections.abc

    return isinstance(value, collections.abc.Sequence) and not isinstance(value, (str, bytes))


def run_tests():
    """unittest.main for a torch_npu test file (argv as usual)."""
    unittest.main(argv=sys.argv)


def _storage_values(value):
    """A storage's elements as a CPU tensor (typed storages keep their dtype; untyped ones are bytes)."""
    if isinstance(value, torch.TypedStorage):
        return torch.tensor(value.tolist(), dtype=value.dtype)
    return torch.tensor(value.cpu().tolist(), dtype=torch.uint8)


class TestCase(_BaseTestCase):
    """unittest.TestCase with torch_npu's assertions; every test starts from the same seeds."""

    precision = 1e-5
    _do_npu_memory_leak_check = False

    def __init__(self, method_name="runTest"):
        super().__init__(method_name)

    @classmethod
    def setUpClass(cls):
        import torch_npu  # noqa: F401  (the device must exist before any test)

    def setUp(self):
        torch.manual_seed(_SEED)
        random.seed(_SEED)
        np.random.seed(_SEED)
        device = os.environ.get("SET_NPU_DEVICE")
        if device is not None:
            torch.npu.set_device(int(device))

    def run(self, result=None):
        return super().run(result)

    # --- torch_npu's comparisons -----------------------------------------------------------
    def assertRtolEqual(self, x, y, prec=1.0e-4, prec16=1.0e-3, auto_trans_dtype=False, message=None):
        """Sequences (an operator's tuple of outputs) are compared pairwise; a tensor against a sequence
        takes the sequence as a tensor of its dtype; auto_trans_dtype casts x to y's dtype first."""
        if _is_rtol_sequence(x) and _is_rtol_sequence(y):
            for x_item, y_item in zip(x, y):
                self.assertRtolEqual(x_item, y_item, prec, prec16, auto_trans_dtype, message)
            return
        if isinstance(x, torch.Tensor) and _is_rtol_sequence(y):
            y = torch.as_tensor(y, dtype=x.dtype)
        elif _is_rtol_sequence(x) and isinstance(y, torch.Tensor):
            x = torch.as_tensor(x, dtype=y.dtype)
        if auto_trans_dtype and isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            x = x.to(y.dtype)
        x, y = _to_numpy(x), _to_numpy(y)
        if x.shape != y.shape:
            self.fail(f"shape error: {x.shape} vs {y.shape}" + (f" ({message})" if message else ""))
        if x.dtype != y.dtype:
            self.fail(f"dtype error: {x.dtype} vs {y.dtype}" + (f" ({message})" if message else ""))
        if x.dtype == np.bool_ or np.issubdtype(x.dtype, np.integer):
            limit = prec
        elif x.dtype == np.float16:
            limit = prec16
        elif np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.complexfloating):
            limit = prec
        else:
            self.fail(f"assertRtolEqual does not compare {x.dtype}")
        if x.size == 0:
            return
        xf, yf = (
            x.astype(np.complex128 if np.iscomplexobj(x) else np.float64),
            y.astype(np.complex128 if np.iscomplexobj(y) else np.float64),
        )
        if not np.array_equal(np.isnan(xf), np.isnan(yf)):
            self.fail("result error: NaNs in different places" + (f" ({message})" if message else ""))
        same_special = (np.isnan(xf) & np.isnan(yf)) | (xf == yf)
        err = np.where(same_special, 0.0, np.abs(xf - yf))
        # torch_npu's rule: the result is wrong only when more than size * limit elements miss the absolute bound
        # AND more than size * limit miss the relative one (|x - y| / (max(|x|, |y|) + a tiny floor)).
        floor = 6e-8 if x.dtype == np.float16 else 1e-9
        rel = err / (np.maximum(np.abs(xf), np.abs(yf)) + floor)
        misses_abs, misses_rel = err > limit, rel > limit
        allowed = x.size * limit
        if misses_abs.sum() > allowed and misses_rel.sum() > allowed:
            worst = int(np.argmax(np.where(misses_abs & misses_rel, rel, -1)))
            self.fail(
                f"result error: {int(misses_abs.sum())} of {x.size} elements differ by more than {limit}, "
                f"{int(misses_rel.sum())} relatively; e.g. {xf.flat[worst]} vs {yf.flat[worst]}"
                + (f" ({message})" if message else "")
            )

    def assertEqual(self, x, y, prec=None, message="", allow_inf=False, exact_dtype=None):
        if isinstance(prec, str) and not message:
            message, prec = prec, None
        if isinstance(x, Number) or isinstance(y, Number):
            self._assert_numbers_equal(x, y, self.precision if prec is None else prec, message, allow_inf)
            return
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            x_t, y_t = (
                v if isinstance(v, torch.Tensor) else torch.as_tensor(list(v) if _is_sequence(v) else v) for v in (x, y)
            )
            tol = self.precision if prec is None else prec
            x_t, y_t = x_t.cpu(), y_t.cpu()
            if x_t.dtype == y_t.dtype and x_t.shape == y_t.shape and torch.equal(x_t, y_t):
                return  # (equal bits: no comparison copies, which for a cache of gigabytes exceed the host's RAM)
            try:
                torch.testing.assert_close(
                    x_t,
                    y_t,
                    rtol=0,
                    atol=tol,
                    equal_nan=True,
                    check_dtype=bool(exact_dtype),
                    check_device=False,
                )
            except AssertionError as e:
                self.fail(f"{message}\n{e}" if message else str(e))
            return
        if isinstance(x, (torch.TypedStorage, torch.UntypedStorage)) or isinstance(
            y, (torch.TypedStorage, torch.UntypedStorage)
        ):
            x, y = (
                _storage_values(v) if isinstance(v, (torch.TypedStorage, torch.UntypedStorage)) else v for v in (x, y)
            )
            self.assertEqual(x, y, prec=prec, message=message, allow_inf=allow_inf, exact_dtype=exact_dtype)
            return
        if isinstance(x, dict) and isinstance(y, dict):
            self.assertEqual(sorted(x, key=repr), sorted(y, key=repr), message=message)
            for key in x:
                self.assertEqual(
                    x[key], y[key], prec=prec, message=message, allow_inf=allow_inf, exact_dtype=exact_dtype
                )
            return
        if _is_sequence(x) and _is_sequence(y):
            x, y = list(x), list(y)
            self.assertEqual(len(x), len(y), message=message)
            for a, b in zip(x, y):
                self.assertEqual(a, b, prec=prec, message=message, allow_inf=allow_inf, exact_dtype=exact_dtype)
            return
        if isinstance(x, float) and isinstance(y, (float, int)) and prec is not None:
            self.assertLessEqual(abs(x - y), prec, message)
            return
        super().assertEqual(x, y, message or None)

    def _assert_numbers_equal(self, x, y, tol, message, allow_inf):
        """A number against a number or a one-element tensor, as torch_npu compares them: the tensor's item, within
        tol; infinities only when allow_inf, and then exactly."""
        x, y = (v.item() if isinstance(v, torch.Tensor) else v for v in (x, y))
        if not (isinstance(x, Number) and isinstance(y, Number)):
            super().assertEqual(x, y, message or None)
            return
        if math.isinf(abs(x)) or math.isinf(abs(y)):
            if not allow_inf:
                self.fail(f"Expected finite numeric values - x={x}, y={y}")
            super().assertEqual(x, y, message or None)
            return
        self.assertLessEqual(abs(x - y), tol, message or None)

    def assertNotEqual(self, x, y, prec=None, message=""):
        try:
            self.assertEqual(x, y, prec=prec)
        except AssertionError:
            return
        self.fail(message or f"{x} == {y}")

    def assertAlmostEqual(self, x, y, places=None, msg=None, delta=None, allow_inf=None):
        if places is not None and delta is None:
            delta = 10 ** (-places)
        self.assertEqual(x, y, prec=delta, message=msg or "", allow_inf=bool(allow_inf))

    def assertTensorsSlowEqual(self, x, y, prec=None, message=""):
        self.assertEqual(x.size(), y.size())
        max_err = 0.0
        for a, b in zip(x.reshape(-1).tolist(), y.reshape(-1).tolist()):
            max_err = max(max_err, abs(a - b))
        self.assertLessEqual(max_err, prec or 0.0, message)

    def assertObjectIn(self, obj, iterable):
        for elem in iterable:
            if id(obj) == id(elem):
                return
        raise AssertionError("object not found in iterable")

    def assertExpectedRaises(self, exc_type, call_fn, *args, **kwargs):
        with self.assertRaises(exc_type) as ctx:
            call_fn(*args, **kwargs)
        return str(ctx.exception)

    def assertExpectedStripMangled(self, s, subname=None):
        return re.sub(r"__torch__[^ ]+", "", s)

    def assertWarns(self, call_fn, msg=""):
        if isinstance(call_fn, type) and issubclass(call_fn, Warning):
            return super().assertWarns(call_fn, msg) if msg else super().assertWarns(call_fn)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call_fn()
        self.assertTrue(caught, msg or "no warning was raised")

    def assertNotWarn(self, call_fn, msg=""):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call_fn()
        self.assertFalse(caught, msg or f"unexpected warnings: {[str(w.message) for w in caught]}")

    def maybeWarnsRegex(self, category, regex=""):
        return self.assertWarnsRegex(category, regex)

    # --- sparse helpers (sparse tensors stay on the CPU: npu has no sparse layouts) ----------
    def genSparseTensor(self, size, sparse_dim, nnz, is_uncoalesced, device="cpu"):
        v_size = [nnz] + list(size[sparse_dim:])
        v = torch.randn(*v_size, device=device)
        i = torch.rand(sparse_dim, nnz, device=device)
        i.mul_(torch.tensor(size[:sparse_dim]).unsqueeze(1).to(i))
        i = i.to(torch.long)
        if is_uncoalesced:
            v = torch.cat([v, torch.randn_like(v)], 0)
            i = torch.cat([i, i], 1)
        x = torch.sparse_coo_tensor(i, v, torch.Size(size))
        if not is_uncoalesced:
            x = x.coalesce()
        return x, x._indices().clone(), x._values().clone()

    def safeCoalesce(self, t):
        return t.coalesce()

    def safeToDense(self, t):
        return t.coalesce().to_dense()
