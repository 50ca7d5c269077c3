"""Test generation as torch_npu's tests use it:

    @instantiate_tests
    class TestAdd(TestCase):
        @Dtypes(torch.float, torch.half)
        @Formats(0, 3, 29)
        def test_add(self, device, dtype, npu_format): ...

makes test_add_float32_0, test_add_float32_3 ... one test per combination."""

import functools
import itertools

import torch

__all__ = [
    "Dtypes",
    "Formats",
    "instantiate_tests",
    "instantiate_ops_tests",
    "feed_data",
    "gen_op_input",
    "gen_ops_testcase",
]


class _Values:
    key = None

    def __init__(self, *args):
        if not args:
            raise ValueError(f"{type(self).__name__} needs at least one value")
        self.values = list(args)

    def __call__(self, fn):
        params = dict(getattr(fn, "_npu_test_params", {}))
        params[self.key] = self.values
        fn._npu_test_params = params
        return fn


class Dtypes(_Values):
    key = "dtype"


class Formats(_Values):
    key = "npu_format"


def _name_of(value):
    if isinstance(value, torch.dtype):
        return str(value).split(".")[-1]
    return str(value)


def feed_data(func, new_name, *args, **kwargs):
    """A copy of test `func` named new_name that is called with the given extra arguments."""

    @functools.wraps(func)
    def test(self):
        return func(self, *args, **kwargs)

    test.__name__ = new_name
    test.__qualname__ = new_name
    return test


def instantiate_tests(arg=None, **kwargs):
    """Class decorator (with or without arguments): expand every test_* method decorated with
    @Dtypes and/or @Formats into one test per combination, named test_x_<dtype>_<format>
    (test_add_float16_29). A method with a `device` parameter gets device="npu"; one without it
    gets only the dtype and format; a method with neither decorator is left as it is."""

    def expand(cls):
        for name in [n for n in list(vars(cls)) if n.startswith("test_")]:
            func = getattr(cls, name)
            params = getattr(func, "_npu_test_params", {})
            if not params:
                continue
            code = func.__code__.co_varnames[: func.__code__.co_argcount]
            keys = sorted(params, key=["dtype", "npu_format"].index)
            delattr(cls, name)
            for combo in itertools.product(*(params[k] for k in keys)):
                values = dict(zip(keys, combo))
                new_name = "_".join([name] + [_name_of(values[k]) for k in keys])
                arguments = {_argument_for(k, code): v for k, v in values.items()}
                if "device" in code:
                    arguments["device"] = "npu"
                setattr(cls, new_name, feed_data(func, new_name, **arguments))
        return cls

    if isinstance(arg, type):
        return expand(arg)
    return expand


def _argument_for(key, parameters):
    """The parameter that takes `key` ("dtype" or "npu_format"): the one whose name contains it
    (dtype, npu_format, format...), as torch_npu matches them."""
    word = "format" if key == "npu_format" else key
    matches = [p for p in parameters if word in p]
    if len(matches) != 1:
        raise TypeError(f"expected one parameter whose name contains {word!r}, got {matches}")
    return matches[0]


def gen_op_input(testcase, func, op_info):
    """The sample inputs of an OpInfo for a generated test (npu device, the op's first dtype)."""
    dtype = next(iter(op_info.dtypes)) if getattr(op_info, "dtypes", None) else torch.float32
    return list(op_info.sample_inputs("npu", dtype, requires_grad=False))


def gen_ops_testcase(cls, func, name, keys, value, op_info):
    """Add one generated test to cls: `func(self, device, dtype, op)` for one dtype of op_info."""
    new_name = "_".join([name, op_info.name.replace(".", "_")] + [_name_of(v) for v in value])
    kwargs = dict(zip(keys, value))
    setattr(cls, new_name, feed_data(func, new_name, device="npu", op=op_info, **kwargs))


def instantiate_ops_tests(op_db):
    """Class decorator: expand every test_* method taking (device, dtype, op) into one test per
    OpInfo of op_db and dtype it supports."""

    def expand(cls):
        for name in [n for n in list(vars(cls)) if n.startswith("test_")]:
            func = getattr(cls, name)
            code = func.__code__.co_varnames[: func.__code__.co_argcount]
            if "op" not in code:
                continue
            delattr(cls, name)
            for op_info in op_db:
                for dtype in sorted(op_info.dtypes, key=str):
                    gen_ops_testcase(cls, func, name, ["dtype"], [dtype], op_info)
        return cls

    return expand
