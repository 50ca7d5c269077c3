"""vnpu's changes to other libraries are declared in one registry and applied when (and only when) the
library is imported."""

import importlib

from subprocess_helpers import run_python

from torch_npu._patches import PATCHES


def test_every_patch_is_declared_with_its_reason_and_a_function():
    assert PATCHES
    for patch in PATCHES:
        assert patch.target.startswith(patch.module.split(".")[0]) and len(patch.why) > 60 and patch.when
        module_name, function, *_ = patch.apply.split(":")
        assert callable(getattr(importlib.import_module(module_name), function))
    assert len({(p.target, p.module) for p in PATCHES}) == len(PATCHES)


def test_patches_wait_for_their_library_and_apply_on_its_import():
    proc = run_python(
        """
        import sys, torch
        import torch_npu
        from torch_npu._patches import applied_patches
        print(sorted(m for m in ("torchvision", "lightning", "pytorch_lightning") if m in sys.modules))
        print([p.target for p in applied_patches() if not p.module.startswith("torch.")])
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
