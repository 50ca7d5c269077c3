"""vnpu's changes to other libraries are declared in one registry and applied when (and only when) the
library is imported."""

import ast
import importlib.util
from pathlib import Path

from subprocess_helpers import run_python

from torch_npu._patches import PATCHES


def test_every_patch_is_declared_with_its_reason_and_a_function():
    assert PATCHES
    for patch in PATCHES:
        # the target names what is changed: in the library whose import triggers it, or in torch
        assert patch.target.startswith((patch.module.split(".")[0], "torch")) and len(patch.why) > 60 and patch.when
        module_name, function, *_ = patch.apply.split(":")
        # read, not imported: importing transfer_to_npu here would apply its patches to this test process
        tree = ast.parse(Path(importlib.util.find_spec(module_name).origin).read_text())
        assert function in {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}, patch.apply
    assert len({(p.target, p.module) for p in PATCHES}) == len(PATCHES)


def test_patches_wait_for_their_library_and_apply_on_its_import():
    proc = run_python(
        """
        import sys, torch
        import torch_npu
        from torch_npu._patches import applied_patches
        print(sorted(m for m in ("torchvision", "lightning", "pytorch_lightning") if m in sys.modules))
        print([p.target for p in applied_patches() if p.module.split(".")[0] not in ("torch", "os", "importlib")])
        import torchvision, inspect
        print([p.target for p in applied_patches() if p.module.startswith("torchvision")])
        print("def _has_ops" in inspect.getsource(torchvision.extension))  # the original loader still serves source
    """,
        timeout=300,
    )
    before, none, after, source = proc.stdout.strip().splitlines()
    assert before == "[]" and none == "[]"
    assert after == "['torchvision.extension._has_ops']" and source == "True"


def test_a_module_imported_before_is_patched_at_once_and_one_imported_later_on_import(tmp_path):
    (tmp_path / "early_library.py").write_text("value = 1\n")
    (tmp_path / "late_library.py").write_text("value = 1\n")
    (tmp_path / "patch_functions.py").write_text(
        "import sys\n" "def bump(name):\n" "    sys.modules[name].value += 1\n" "    return True\n"
    )
    proc = run_python(f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        import early_library
        from torch_npu._patches import Patch, applied_patches
        from torch_npu._patches.registry import apply_patches
        patches = [Patch(target=f"{{m}}.value", module=m, why="test", when="test",
                         apply=f"patch_functions:bump:{{m}}") for m in ("early_library", "late_library")]
        apply_patches(patches)
        print(early_library.value, "late_library" in sys.modules)
        import late_library
        print(late_library.value, [p.module for p in applied_patches()][-2:])
    """)
    first, second = proc.stdout.strip().splitlines()
    assert first == "2 False"
    assert second == "2 ['early_library', 'late_library']"


_SNAPSHOT = """
    import inspect, json, os, re, sys
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    import torch, torch.distributed, torch.optim.optimizer, torch.optim.swa_utils, torch.utils._foreach_utils
    import torch.utils.checkpoint

    SPACES = {"torch": torch, "torch.Tensor": torch.Tensor, "torch.nn.Module": torch.nn.Module,
              "torch.UntypedStorage": torch.UntypedStorage, "torch.distributed": torch.distributed,
              "torch.cuda": torch.cuda, "torch.utils.checkpoint": torch.utils.checkpoint,
              "torch.optim.optimizer": sys.modules["torch.optim.optimizer"],
              "torch.optim.swa_utils": sys.modules["torch.optim.swa_utils"],
              "torch.utils._foreach_utils": sys.modules["torch.utils._foreach_utils"],
              "torch.utils.checkpoint.DefaultDeviceType": torch.utils.checkpoint.DefaultDeviceType,
              "torch.nn.parameter.UninitializedTensorMixin": torch.nn.parameter.UninitializedTensorMixin}
    # What PyTorch's own PrivateUse1 extension points create for a backend named "npu"
    # (rename_privateuse1_backend, generate_methods_for_privateuse1_backend, _register_device_module).
    EXTENSION_POINTS = ("torch.npu", "torch.Tensor.npu", "torch.Tensor.is_npu", "torch.nn.Module.npu",
                        "torch.UntypedStorage.npu", "torch.UntypedStorage.is_npu")

    def state(value):  # containers and plain values by content (changed in place), the rest by identity
        return repr(value) if isinstance(value, (list, tuple, str, int, float, bool)) else id(value)

    def snapshot():
        return {f"{label}.{name}": state(inspect.getattr_static(space, name)) for label, space in SPACES.items()
                for name in list(vars(space))}

    def unregistered(before, after):
        from torch_npu._patches import applied_patches
        declared = [c for p in applied_patches() for c in p.changes] + list(EXTENSION_POINTS)
        changed = [k for k in after if k not in before or before[k] != after[k]]
        patterns = [re.compile(re.escape(d).replace(r"\\*", r"[^.]*")) for d in declared]  # * stays in one name
        return sorted(k for k in changed if not any(p.fullmatch(k) for p in patterns))

    before = snapshot()
    import torch_npu
    after = snapshot()
    changed = sorted(k for k in after if k not in before or before[k] != after[k])
    result = {"changed": changed, "unregistered": unregistered(before, after)}
    torch.Tensor.sneaky_method = lambda self: None  # a change nobody declared
    torch.distributed.all_reduce = lambda *a, **k: None
    sys.modules["torch.optim.optimizer"].sneaky_default = "npu"
    result["caught"] = unregistered(before, snapshot())
    print(json.dumps(result))
"""


def test_import_torch_npu_changes_torch_only_where_the_registry_says():
    import json

    proc = run_python(_SNAPSHOT, timeout=300)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["unregistered"] == [], got["unregistered"]
    assert "torch.npu" in got["changed"] and "torch.npu_rms_norm" in got["changed"]
    assert "torch.distributed.init_process_group" in got["changed"]
    assert "torch.utils.checkpoint.DefaultDeviceType._default_device_type" in got["changed"]
    assert "torch.nn.parameter.UninitializedTensorMixin._allowed_methods" in got["changed"]
    assert got["caught"] == [
        "torch.Tensor.sneaky_method",
        "torch.distributed.all_reduce",
        "torch.optim.optimizer.sneaky_default",
    ]


def test_transfer_to_npu_changes_torch_only_where_its_registry_entries_say():
    import json

    script = _SNAPSHOT.replace(
        "    before = snapshot()\n    import torch_npu\n",
        # the modules transfer_to_npu wraps classes of are imported first: their own import changes torch
        # (DTensor joins the foreach types), which is PyTorch's doing, not a patch
        "    import torch_npu, torch.distributed.fsdp, torch.distributed.pipelining, torch.distributed.device_mesh\n"
        "    before = snapshot()\n    import torch_npu.contrib.transfer_to_npu\n",
    )
    proc = run_python(script, timeout=300)
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["unregistered"] == [], got["unregistered"]
    assert {"torch.cuda.is_available", "torch.Generator", "torch.distributed.init_process_group"} <= set(got["changed"])
    # transfer_to_npu declares torch.Tensor.* and torch.distributed.*; the optimizer module is not its
    assert got["caught"] == ["torch.optim.optimizer.sneaky_default"]
