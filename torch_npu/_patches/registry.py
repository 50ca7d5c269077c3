"""The patch record, and applying patches now or when their module is first imported."""

import importlib
import importlib.abc
import importlib.util
import sys
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Patch:
    target: str  # the attribute changed, "module.attribute"
    module: str  # the module whose import triggers the patch
    why: str
    when: str
    apply: str  # "package.module:function[:argument]"; the function returns True when it changed something
    # What the patch adds to or replaces in torch, as "torch.Tensor.name" (a * matches within one name): the
    # import snapshot tests hold every change `import torch_npu` (and transfer_to_npu) makes against these.
    changes: tuple = ()
    # A patch that holds only while something runs (RUNTIME_PATCHES) names the function undoing it; set_runtime_patch
    # applies and removes it, never an import.
    remove: str = ""

    def run(self, function_spec=None):
        module_name, function, *argument = (function_spec or self.apply).split(":")
        return bool(getattr(importlib.import_module(module_name), function)(*argument))


def set_runtime_patch(patch, on):
    """Applies (on) or removes a patch of RUNTIME_PATCHES; True when it changed something."""
    return patch.run(patch.apply if on else patch.remove)


_applied = []
_pending = {}  # module name -> patches waiting for its import
_lock = threading.Lock()


def applied_patches():
    """The patches that changed something in this process, in the order they were applied."""
    return list(_applied)


def _run(patch):
    if patch.run():
        _applied.append(patch)


class _AfterImport(importlib.abc.Loader):
    """Runs the module as its own loader would, then the patches waiting for it."""

    def __init__(self, loader, fullname):
        self._loader = loader
        self._fullname = fullname

    def __getattr__(self, name):  # get_source, get_resource_reader...: the original loader's
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        with _lock:
            patches = _pending.pop(self._fullname, ())
        for patch in patches:
            _run(patch)
        if not _pending:
            _uninstall_finder()


class _PatchFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname not in _pending:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _AfterImport(spec.loader, fullname)
                return spec
        return None


_finder = _PatchFinder()


def _uninstall_finder():
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)


def apply_patches(patches):
    """Applies each patch now if its module is imported, else when it is."""
    for patch in patches:
        if patch.module in sys.modules:
            _run(patch)
        else:
            with _lock:
                _pending.setdefault(patch.module, []).append(patch)
    if _pending and _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)
