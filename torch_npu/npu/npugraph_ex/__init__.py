"""npugraph_ex: run torch.compile graphs as NPU graphs (capture once, replay afterwards).

    model = torch.compile(model, backend=torch_npu.npu.npugraph_ex.compile_fx)

Inputs must not require grad (inference); otherwise the FX graph runs eagerly. Replays write into
the captured outputs, so a result is valid until the next call (as with CUDA graph trees).
"""
import torch

from torch_npu.npu.npugraph_ex import inference, scope  # noqa: F401

__all__ = ["compile_fx", "register_replacement"]

_replacements = []


def register_replacement(search_fn, replace_fn, example_inputs, trace_fn=None, extra_check=None,
                         search_fn_pattern=None, scalar_workaround=None, skip_duplicates=False):
    """Rewrite every occurrence of search_fn's pattern into replace_fn's in graphs compile_fx
    compiles (a torch.fx subgraph rewrite)."""
    if not callable(search_fn) or not callable(replace_fn):
        raise TypeError("register_replacement expects search_fn and replace_fn functions")
    key = (search_fn, replace_fn)
    if skip_duplicates and any(k == key for k, _ in _replacements):
        return False
    _replacements.append((key, extra_check))
    return True


def _apply_replacements(gm):
    for (search_fn, replace_fn), _ in _replacements:
        torch.fx.subgraph_rewriter.replace_pattern(gm, search_fn, replace_fn)
    return gm


def compile_fx(gm, example_inputs=None, options=None):
    """A torch.compile backend that captures the FX graph in an NPU graph on its first call."""
    from torch_npu.npu.graphs import NPUGraph, graph

    if isinstance(gm, torch.fx.GraphModule) and _replacements:
        gm = _apply_replacements(gm)
    state = {}

    def run(*args):
        if any(isinstance(a, torch.Tensor) and a.requires_grad for a in args) or torch.is_grad_enabled() and \
                any(p.requires_grad for p in getattr(gm, "parameters", lambda: [])()):
            return gm(*args)
        if "graph" not in state:
            eager = gm(*args)  # warm-up, and the first result
            static_inputs = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            npu_graph = NPUGraph()
            with graph(npu_graph):
                static_outputs = gm(*static_inputs)
            state.update(graph=npu_graph, inputs=static_inputs, outputs=static_outputs)
            return eager
        for static, new in zip(state["inputs"], args):
            if isinstance(static, torch.Tensor):
                static.copy_(new)
        state["graph"].replay()
        return state["outputs"]

    return run
