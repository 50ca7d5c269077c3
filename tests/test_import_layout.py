"""What `import torch_npu` leaves behind, as torch_npu's own bootstrap tests check it: the modules it loads,
top-level names (eager, lazy and cached), every npu operator as torch_npu.<name> with its torch alias, the
dtype names, os.getenv patched, Dynamo / inductor / c10d registrations — each in a fresh interpreter."""

import json

import pytest
import torch
from subprocess_helpers import run_python

import torch_npu

LOADED = [
    "torch_npu.npu",
    "torch_npu.npu.amp",
    "torch_npu.npu.aclnn",
    "torch_npu._afd",
    "torch_npu.optim",
    "torch_npu.dynamo",
    "torch_npu._logging",
    "torch_npu.profiler",
    "torch_npu.distributed",
    "torch_npu.distributed.nn",
    "torch_npu.distributed.rpc",
    "torch_npu.distributed.rpc.backend_registry",
    "torch_npu.distributed.nn.functional",
    "torch_npu.op_plugin",
    "torch_npu.op_plugin.meta",
    "torch_npu.op_plugin.meta._meta_registrations",
    "torch_npu.asd.checksum",
    "torch_npu.utils._dynamo",
    "torch_npu.utils._inductor",
    "torch_npu.utils.custom_ops",
    "torch_npu.utils.patch_getenv",
    "torch_npu.utils.syncbatchnorm",
    "torch_npu.utils._asd_detector",
    "torch_npu.utils.asd_detector",
    "torch_npu._op_plugin_docs",
]


def test_import_loads_torch_npus_modules_and_top_level_names():
    proc = run_python(f"""
        import json, sys
        import torch_npu
        result = {{
            "missing": [m for m in {LOADED!r} if m not in sys.modules],
            "attrs": [a for a in ("npu", "optim", "dynamo", "profiler", "op_plugin", "utils", "asd")
                      if not hasattr(torch_npu, a)],
            "docs_attr": hasattr(torch_npu, "_op_plugin_docs"),
            "initialized": torch_npu.npu.is_initialized(),
            "checksum": torch_npu.asd.checksum is sys.modules["torch_npu.asd.checksum"],
            "syncbn": torch_npu.utils.syncbatchnorm is sys.modules["torch_npu.utils.syncbatchnorm"],
        }}
        lazy = {{}}
        for name in ("erase_stream", "matmul_checksum", "HiFloat8Tensor"):
            before = (name in torch_npu.__all__, name in dir(torch_npu), name in torch_npu.__dict__)
            value = getattr(torch_npu, name)
            lazy[name] = [*before, callable(value), name in torch_npu.__dict__]
        result["lazy"] = lazy
        print(json.dumps(result))
    """)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["missing"] == [] and got["attrs"] == []
    assert got["docs_attr"] is False and got["initialized"] is False
    assert got["checksum"] and got["syncbn"]
    lazy = ("erase_stream", "matmul_checksum", "HiFloat8Tensor")
    assert got["lazy"] == {name: [True, True, False, True, True] for name in lazy}


def test_every_npu_operator_is_exported_listed_and_aliased_in_torch():
    names = {
        op.split("::", 1)[1].split(".", 1)[0] for op in torch._C._dispatch_get_all_op_names() if op.startswith("npu::")
    }
    assert names and [n for n in names if not hasattr(torch_npu, n)] == []
    assert [n for n in names if not n.startswith("_") and n not in torch_npu.__all__] == []
    assert [n for n in names if not hasattr(torch, n)] == []
    for name in ("one_", "scatter_update", "_npu_silent_check"):
        try:
            getattr(torch, name)(torch.ones(1))
        except RuntimeError as err:
            assert str(err).splitlines() == [
                f"torch.{name} is deprecated and will be removed in future version. Use torch_npu.{name} instead.",
                str(err).splitlines()[1],
            ]
            assert "ERR00007 PTA feature not supported" in str(err).splitlines()[1]
        else:
            raise AssertionError(f"torch.{name} ran")


def test_operator_documentation_shows_the_schema_and_the_kernels_text():
    doc = torch_npu.npu_rms_norm.__doc__
    assert doc.splitlines()[0] == str(torch.ops.npu.npu_rms_norm.default._schema)
    assert "rstd" in doc


def test_dtype_names_of_cd_are_torch_npu_attributes():
    dtype_class = torch_npu._C._cd.DType
    names = [n for n in dir(dtype_class) if not n.startswith("_")]
    assert len(names) == 27 and {"hifloat8", "int4", "float8_e4m3fn", "float8_e8m0fnu", "float4_e2m1fn_x2"} <= set(
        names
    )
    assert all(getattr(torch_npu, n) == getattr(dtype_class, n) for n in names)
    # aclDataType + 256, the numbers torch_npu's operators take in their dtype arguments
    assert (int(torch_npu.float32), int(torch_npu.hifloat8), int(torch_npu.float8_e4m3fn)) == (256, 290, 292)


def test_dtype_numbers_that_pytorch_has_stand_for_its_dtypes_and_the_cards_own_are_refused():
    from torch_npu.ops._common import dtype_of

    assert dtype_of(torch_npu.float8_e4m3fn, "op") is torch.float8_e4m3fn and dtype_of(256, "op") is torch.float32
    with pytest.raises(RuntimeError) as info:
        dtype_of(torch_npu.float6_e3m2, "op")
    assert str(info.value).splitlines()[0] == "op: dtype=torch_npu.float6_e3m2 is a format vnpu does not compute"


def test_os_getenv_is_torch_npus_and_reads_the_environment(monkeypatch):
    import os

    import torch_npu.utils.patch_getenv as patch_getenv

    assert os.getenv is patch_getenv._patched_getenv and os.environ.get is patch_getenv._patched_environ_get
    monkeypatch.setenv("VNPU_LAYOUT_PROBE", "7")
    assert os.getenv("VNPU_LAYOUT_PROBE") == "7" and os.environ.get("VNPU_LAYOUT_ABSENT", "d") == "d"


def test_dynamo_inductor_and_c10d_registrations():
    proc = run_python("""
        import json, torch, torch_npu
        import torch.distributed as dist
        from torch._dynamo.device_interface import get_interface_for_device
        from torch._dynamo.backends.registry import _BACKENDS
        from torch._inductor.codegen.common import device_op_overrides_dict
        print(json.dumps({
            "interface": get_interface_for_device("npu") is not None,
            "backends": [b for b in ("npu", "npugraphs", "npugraph_ex") if b in _BACKENDS],
            "overrides": type(device_op_overrides_dict.get("npu")).__name__,
            "c10d": [b for b in ("hccl", "lccl") if b in dist.Backend.backend_list],
        }))
    """)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {
        "interface": True,
        "backends": ["npu", "npugraphs", "npugraph_ex"],
        "overrides": "CpuDeviceOpOverrides",
        "c10d": ["hccl", "lccl"],
    }


def test_compile_backend_npu_is_torchairs_and_matches_eager():
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).npu()
    x = torch.randn(5, 8).npu()
    compiled = torch.compile(model, backend="npu")
    assert torch.equal(compiled(x).cpu(), model(x).cpu())


def test_import_leaves_garbage_collection_as_it_found_it_and_freezes_its_objects():
    """Collection pauses during the whole import and resumes after; the import-time objects end in the
    permanent generation (later collections skip them)."""
    for disable, enabled in (("", "True"), ("gc.disable(); ", "False")):
        done = run_python(
            "import gc, torch; collections = []; gc.callbacks.append(lambda phase, info: collections.append(phase)); "
            f"{disable}import torch_npu; print(gc.isenabled(), gc.get_freeze_count() > 100000, len(collections))",
            env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
        )
        assert done.stdout.split() == [enabled, "True", "0"], done.stdout + done.stderr


def test_a_failing_import_resumes_garbage_collection():
    done = run_python(
        """
        import gc, sys, torch
        sys.modules["torch_npu._device_registration"] = None  # the import fails half-way
        try:
            import torch_npu
        except ImportError as error:
            print(type(error).__name__, gc.isenabled(), gc.get_freeze_count())
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert done.stdout.split() == ["ModuleNotFoundError", "True", "0"], done.stdout + done.stderr
