"""GELU (exact, approximate='none') rewritten to torch_npu's fast_gelu in a TorchScript graph."""

import torch

_GELU = """
    graph(%x):
        %approximate = prim::Constant[value='none']()
        %y = aten::gelu(%x, %approximate)
        return (%y)
"""

_FAST_GELU = """
    graph(%x):
        %y = npu::fast_gelu(%x)
        return (%y)
"""


def fast_gelu_pass(jit_mod):
    """Rewrites, in place, every exact GELU of `jit_mod`'s graph (a traced or scripted function or module)
    to `npu::fast_gelu`, the sigmoid approximation the card computes faster; results change within the
    approximation's error (about 0.02 at most)."""
    torch._C._jit_pass_custom_pattern_based_rewrite_graph(_GELU, _FAST_GELU, jit_mod.graph)
