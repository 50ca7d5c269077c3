"""torch_npu.jit.optimize: exact GELUs of TorchScript graphs become npu::fast_gelu, in place."""

import torch

import torch_npu
import torch_npu.jit
from torch_npu.jit.fusion_pass.fast_gelu import fast_gelu_pass
from torch_npu.jit.register_fusion_pattern import optimize


def squared_gelu(x):
    return torch.nn.functional.gelu(x**2)


class SquaredGelu(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x**2)


def kinds(jit_mod):
    return [node.kind() for node in jit_mod.graph.nodes()]


def test_traced_functions_and_modules_compute_fast_gelu_after_optimize(tmp_path):
    x = torch.rand(3, 3).npu()
    function = torch.jit.trace(squared_gelu, x)
    module = torch.jit.trace(SquaredGelu().train(), x)
    exact = function(x)
    assert "aten::gelu" in kinds(function)
    assert torch_npu.jit.optimize is optimize
    torch_npu.jit.optimize(function)
    optimize(module)
    expected = torch_npu.fast_gelu(x**2)
    for rewritten in (function, module):
        assert "npu::fast_gelu" in kinds(rewritten) and "aten::gelu" not in kinds(rewritten)
        path = tmp_path / "rewritten.pt"
        torch.jit.save(rewritten, str(path))
        reloaded = torch.jit.load(str(path))
        assert torch.equal(reloaded(x).cpu(), expected.cpu())
    assert not module.training  # optimize_for_inference puts the module in eval mode, as on the card
    assert 0 < (exact - expected).abs().max().item() < 0.05


def test_only_the_exact_gelu_is_rewritten_and_scripted_graphs_too():
    def tanh_gelu(x):
        return torch.nn.functional.gelu(x, approximate="tanh")

    x = torch.rand(4).npu()
    traced = torch.jit.trace(tanh_gelu, x)
    fast_gelu_pass(traced)
    assert "aten::gelu" in kinds(traced) and "npu::fast_gelu" not in kinds(traced)
    scripted = torch.jit.script(squared_gelu)
    fast_gelu_pass(scripted)
    assert "npu::fast_gelu" in kinds(scripted)
    assert torch.equal(scripted(x).cpu(), torch_npu.fast_gelu(x**2).cpu())
