"""torch_npu.dynamo: the Dynamo backends of the npu device, known to torch.compile by name.

- "npu": torchair's backend with its default configuration (torchair.get_npu_backend()), what
  `torch.compile(model, backend="npu")` means on Ascend;
- "npugraphs" and "npugraph_ex": torch_npu._inductor.backends (also package entry points).

They are registered in Dynamo's backend registry when it is imported (patch registry), each built on first
use, so `import torch_npu` imports neither Dynamo nor torchair. `torch_npu.dynamo.torchair` is the torchair
package.
"""

import importlib

__all__ = []

_ENTRY_POINT_BACKENDS = {
    "npugraphs": "torch_npu._inductor.backends:npugraphs",
    "npugraph_ex": "torch_npu._inductor.backends:npugraph_ex",
}
_npu_backend = None


def _npu(gm, example_inputs, **kwargs):
    """torch.compile(model, backend="npu"): torchair's backend, default configuration."""
    global _npu_backend
    if _npu_backend is None:
        import torchair

        _npu_backend = torchair.get_npu_backend()
    return _npu_backend(gm, example_inputs, **kwargs)


def _lazy(target):
    module_name, function = target.split(":")

    def backend(gm, example_inputs, **kwargs):
        return getattr(importlib.import_module(module_name), function)(gm, example_inputs, **kwargs)

    backend.__name__ = backend.__qualname__ = function
    return backend


def register_backends():
    """Add npu, npugraphs and npugraph_ex to torch._dynamo's registry (once); True when added."""
    from torch._dynamo.backends import registry

    added = False
    for name, backend in (("npu", _npu), *((n, _lazy(t)) for n, t in _ENTRY_POINT_BACKENDS.items())):
        if name not in registry._COMPILER_FNS:
            registry.register_backend(compiler_fn=backend, name=name)
            added = True
    return added


def __getattr__(name):
    if name == "torchair":
        return importlib.import_module("torchair")
    raise AttributeError(f"module 'torch_npu.dynamo' has no attribute {name!r}")
