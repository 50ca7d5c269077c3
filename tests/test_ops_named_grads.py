"""The gradient operators torch_npu exposes by name, each against autograd of its forward (or of the layers it
fuses) written with torch on the CPU."""

import torch
import torch.nn.functional as F

import torch_npu


def test_layernorm_grad_from_saved_statistics():
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(4, 6, generator=g), torch.randn(6, generator=g), torch.randn(6, generator=g)
    leaves = [t.clone().requires_grad_(True) for t in (x, w, b)]
    y = F.layer_norm(leaves[0], (6,), leaves[1], leaves[2])
    dy = torch.randn(4, 6, generator=g)
    y.backward(dy)
    _, mean, rstd = torch.native_layer_norm(x, [6], w, b, 1e-5)
    got = torch_npu.npu_layernorm_grad(dy.npu(), x.npu(), [6], mean.npu(), rstd.npu(), w.npu(), b.npu())
    for have, leaf in zip(got, leaves):
        torch.testing.assert_close(have.cpu(), leaf.grad, rtol=1e-5, atol=1e-5)


def test_geglu_grad():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 8, generator=g)
    for left in (False, True):
        leaf = x.clone().requires_grad_(True)
        a, b = leaf.chunk(2, -1)
        y = F.gelu(a, approximate="tanh") * b if left else a * F.gelu(b, approximate="tanh")
        dy = torch.randn(3, 4, generator=g)
        y.backward(dy)
        got = torch_npu.npu_geglu_grad(dy.npu(), x.npu(), torch.empty(0).npu(), -1, 1, left)
        torch.testing.assert_close(got.cpu(), leaf.grad, rtol=1e-5, atol=1e-5)


def test_group_norm_swish_grad_with_a_mask():
    g = torch.Generator().manual_seed(2)
    x, w, b = torch.randn(2, 4, 3, generator=g), torch.randn(4, generator=g), torch.randn(4, generator=g)
    leaves = [t.clone().requires_grad_(True) for t in (x, w, b)]
    z = F.group_norm(leaves[0], 2, leaves[1], leaves[2])
    y = z * torch.sigmoid(0.5 * z)
    dy = torch.randn(y.shape, generator=g)
    y.backward(dy)
    out, mean, rstd = torch_npu.npu_group_norm_swish(x.npu(), 2, w.npu(), b.npu(), swish_scale=0.5)
    got = torch_npu.npu_group_norm_swish_grad(dy.npu(), x.npu(), 2, w.npu(), b.npu(), mean, rstd, [True, False, True], swish_scale=0.5)  # fmt: skip
    torch.testing.assert_close(got[0].cpu(), leaves[0].grad, rtol=1e-4, atol=1e-5)
    assert got[1].numel() == 0
    torch.testing.assert_close(got[2].cpu(), leaves[2].grad, rtol=1e-4, atol=1e-5)


def test_fused_attention_qkv_grad_is_the_three_linear_layers_backward():
    g = torch.Generator().manual_seed(3)
    h = torch.randn(6, 8, generator=g)
    kernels = [torch.randn(8, 8, generator=g) for _ in range(3)]
    biases = [torch.randn(8, generator=g) for _ in range(3)]
    leaves = [t.clone().requires_grad_(True) for t in (h, *kernels, *biases)]
    outs = [F.linear(leaves[0], leaves[1 + i], leaves[4 + i]) for i in range(3)]
    grads = [torch.randn(6, 8, generator=g) for _ in range(3)]
    ln = torch.randn(6, 8, generator=g)
    torch.autograd.backward(outs, grads)
    got = torch_npu.npu_fused_attention_qkv_grad(
        *(t.npu() for t in grads), *(k.npu() for k in kernels), h.npu(), ln.npu()
    )
    torch.testing.assert_close(got[0].cpu(), leaves[0].grad + ln, rtol=1e-5, atol=1e-5)
    for have, leaf in zip(got[1:], leaves[1:]):
        torch.testing.assert_close(have.cpu(), leaf.grad, rtol=1e-5, atol=1e-5)


def test_routing_map_grads_match_autograd_of_the_forwards():
    g = torch.Generator().manual_seed(4)
    tokens_num, experts, hidden = 5, 4, 3
    routing = torch.zeros(tokens_num, experts, dtype=torch.bool)
    for t in range(tokens_num):
        routing[t, torch.randperm(experts, generator=g)[:2]] = True
    x, probs = torch.randn(tokens_num, hidden, generator=g), torch.rand(tokens_num, experts, generator=g)
    xn, pn = x.npu().requires_grad_(True), probs.npu().requires_grad_(True)
    permuted, permuted_probs, sorted_indices = torch_npu.npu_moe_token_permute_with_routing_map(
        xn, routing.npu(), probs=pn, num_out_tokens=2 * tokens_num
    )
    gp, gpp = torch.randn(permuted.shape, generator=g), torch.randn(permuted_probs.shape, generator=g)
    torch.autograd.backward([permuted, permuted_probs], [gp.npu(), gpp.npu()])
    dt, dp = torch_npu.npu_moe_token_permute_with_routing_map_grad(gp.npu(), gpp.npu(), sorted_indices, routing.npu(), experts, tokens_num, False)  # fmt: skip
    torch.testing.assert_close(dt.cpu(), xn.grad.cpu())
    torch.testing.assert_close(dp.cpu(), pn.grad.cpu())

    rows = torch.randn(2 * tokens_num, hidden, generator=g)
    rn, pn2 = rows.npu().requires_grad_(True), probs.npu().requires_grad_(True)
    out = torch_npu.npu_moe_token_unpermute_with_routing_map(rn, sorted_indices, [tokens_num, hidden], probs=pn2, routing_map=routing.npu())  # fmt: skip
    gout = torch.randn(out.shape, generator=g)
    out.backward(gout.npu())
    d_rows, d_probs = torch_npu.npu_moe_token_unpermute_with_routing_map_grad(
        gout.npu(), sorted_indices, sorted_indices, routing.npu(), rows.npu(), probs.npu(), False, [tokens_num, hidden]
    )
    torch.testing.assert_close(d_rows.cpu(), rn.grad.cpu())
    torch.testing.assert_close(d_probs.cpu(), pn2.grad.cpu())


def test_a_gradient_operator_runs_inside_a_compiled_graph():
    """The compiled graph runs its operators with autograd's dispatch keys excluded; a gradient operator that
    differentiates its own composition must still record."""
    g = torch.Generator().manual_seed(5)
    x, dy = torch.randn(3, 8, generator=g), torch.randn(3, 4, generator=g)

    def grad(dy, x):
        return torch_npu.npu_geglu_grad(dy, x, torch.empty(0, device=x.device), -1, 1, False)

    eager = grad(dy.npu(), x.npu())
    compiled = torch.compile(grad, backend="aot_eager", fullgraph=True)(dy.npu(), x.npu())
    torch.testing.assert_close(compiled.cpu(), eager.cpu(), rtol=0, atol=0)
