"""npu_bert_apply_adam: torch_npu's own expected values, the ApplyAdamV2 formula written out for both modes
(gradient clipping by the global norm, weight decay, mbert's step size), the functional form, and the `out=`
tuple of torch_npu's Python bindings (also for npu_apply_adam_w / npu_apply_adam)."""

import pytest
import torch
from error_cases import raises_operator_error

import torch_npu


def test_torch_npus_expected_values():
    torch.manual_seed(3)
    var = torch.rand(321538).uniform_(-32.0, 21.0).npu()
    m, v = torch.zeros(321538).npu(), torch.zeros(321538).npu()
    grad = torch.rand(321538).uniform_(-0.05, 0.03).npu()
    out = torch_npu.npu_bert_apply_adam(0.0, 0.9, 0.99, 1e-06, grad, -1.0, 0.0, 0.0, out=(var, m, v))
    assert out[0] is var and out[1] is m and out[2] is v
    torch.testing.assert_close(var[:3].cpu(), torch.tensor([13.1862, -30.1250, -20.4954]), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(m[:3].cpu(), torch.tensor([0.0014, 0.0018, -0.0021]), rtol=1e-2, atol=1e-4)
    torch.testing.assert_close(v[:3].cpu(), torch.tensor([1.8999e-06, 3.2629e-06, 4.4347e-06]), rtol=1e-3, atol=1e-9)


def reference(var, m, v, lr, b1, b2, eps, grad, max_norm, global_norm, wd, step_size, mode):
    var, m, v, grad = (t.double() for t in (var, m, v, grad))
    g = grad / global_norm if (max_norm > 0 and global_norm > 1) else grad
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g**2
    update = m / (v.sqrt() + eps)
    if mode == 0:
        var = var - lr * (update + (wd * var if wd > 0 else 0))
    else:
        var = var - (update * step_size + (wd * lr * var if wd > 0 else 0))
    return var.float(), m.float(), v.float()


@pytest.mark.parametrize(
    "max_norm, global_norm, wd, step_size, mode",
    [(-1.0, 0.0, 0.0, None, 0), (1.0, 4.0, 0.01, None, 0), (1.0, 0.5, 0.01, None, 0), (1.0, 3.0, 0.02, 0.003, 1)],
)
def test_the_formula_over_several_steps(max_norm, global_norm, wd, step_size, mode):
    g = torch.Generator().manual_seed(7)
    var, m, v = torch.randn(64, generator=g), torch.zeros(64), torch.zeros(64)
    state = [t.npu() for t in (var, m, v)]
    for _ in range(3):
        grad = torch.randn(64, generator=g)
        torch_npu.npu_bert_apply_adam(1e-2, 0.9, 0.999, 1e-6, grad.npu(), max_norm, global_norm, wd, step_size, mode,
                                      out=tuple(state))  # fmt: skip
        var, m, v = reference(var, m, v, 1e-2, 0.9, 0.999, 1e-6, grad, max_norm, global_norm, wd, step_size, mode)
        for got, want in zip(state, (var, m, v)):
            torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-6)


def test_functional_form_starts_from_zero_state():
    grad = torch.randn(16)
    got = torch_npu.npu_bert_apply_adam(0.1, 0.9, 0.99, 1e-8, grad.npu(), -1.0, 0.0, 0.0)
    want = reference(torch.zeros(16), torch.zeros(16), torch.zeros(16), 0.1, 0.9, 0.99, 1e-8, grad, -1, 0, 0, None, 0)
    for a, b in zip(got, want):
        torch.testing.assert_close(a.cpu(), b, rtol=1e-5, atol=1e-6)


def test_out_tuples_of_the_adam_operators():
    grad = torch.ones(3).npu()
    var, m, v = torch.ones(3).npu(), torch.zeros(3).npu(), torch.zeros(3).npu()
    result = torch_npu.npu_apply_adam_w(0.9, 0.99, 0.1, 0.0, 0.9, 0.99, 1e-8, grad, None, False, False, out=(var, m, v))
    assert result[0] is var and not torch.equal(var.cpu(), torch.ones(3))
    result = torch_npu.npu_apply_adam(0.9, 0.99, 0.1, 0.9, 0.99, 1e-8, grad, False, False, out=[var, m, v])
    assert result[2] is v
    with pytest.raises(TypeError) as info:
        torch_npu.npu_bert_apply_adam(0.1, 0.9, 0.99, 1e-8, grad, -1.0, 0.0, 0.0, out=(var, m))
    assert str(info.value) == "npu::npu_bert_apply_adam: out= takes 3 tensors (var, m, v), got 2"


def test_positional_out_form_of_apply_adam_w_matches_the_amsgrad_formula():
    """torch_npu.npu_apply_adam_w_out(..., amsgrad, maximize, var, m, v) with one-element tensor hyper-parameters,
    against AdamW with amsgrad written out (the form Ascend's own test of the operator calls)."""
    g = torch.Generator().manual_seed(4)
    var, m, v, grad, max_norm = (torch.rand(64, generator=g) for _ in range(5))
    hp = dict(beta1_power=0.9, beta2_power=0.99, lr=0.01, weight_decay=0.1, beta1=0.9, beta2=0.99, eps=1e-8)
    m_want = m * hp["beta1"] + (1 - hp["beta1"]) * grad
    v_want = v * hp["beta2"] + (1 - hp["beta2"]) * grad * grad
    # the powers given are beta^(t-1); the kernel multiplies them by beta (CANN's ApplyAdamW, op-plugin's reference)
    bias2, bias1 = 1 - hp["beta2_power"] * hp["beta2"], 1 - hp["beta1_power"] * hp["beta1"]
    denom = torch.sqrt(torch.maximum(max_norm, v_want) / bias2) + hp["eps"]
    var_want = var * (1 - hp["lr"] * hp["weight_decay"]) - hp["lr"] * m_want / bias1 / denom
    state = [t.npu() for t in (var, m, v)]
    scalars = [torch.tensor([value]).npu() for value in hp.values()]
    out = torch_npu.npu_apply_adam_w_out(*scalars, grad.npu(), max_norm.npu(), True, False, *state)
    assert out[0] is state[0]
    for got, want in zip(state, (var_want, m_want, v_want)):
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-6)


def test_bad_arguments():
    grad, state = torch.ones(4).npu(), [torch.zeros(4).npu() for _ in range(3)]
    raises_operator_error(
        lambda: torch_npu.npu_bert_apply_adam(0.1, 0.9, 0.99, 1e-8, grad, -1.0, 0.0, 0.0, None, 2, out=state),
        "npu_bert_apply_adam: adam_mode must be 0 (adam) or 1 (mbert_adam), got 2",
    )
    raises_operator_error(
        lambda: torch_npu.npu_bert_apply_adam(0.1, 0.9, 0.99, 1e-8, grad, -1.0, 0.0, 0.0, None, 1, out=state),
        "npu_bert_apply_adam: adam_mode=1 (mbert_adam) needs step_size",
    )
    raises_operator_error(
        lambda: torch_npu.npu_bert_apply_adam(0.1, 0.9, 0.99, 1e-8, torch.ones(5).npu(), -1.0, 0.0, 0.0, out=state),
        "npu_bert_apply_adam: var, m, v and grad must have one shape and dtype, got (4,), (4,), (4,), (5,)",
    )
