"""npu_dynamic_mx_quant against the OCP MX rule written out (shared exponent from frexp, nearest-value search
over the FP4 grids with each rounding mode, the paired scale layout built by loops), FP8 and FP4 outputs, other
axes, and its argument checks."""

import functools
import math

import pytest
import torch
from error_cases import raises_operator_error

import torch_npu

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
E1M2 = [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75]


def shared_exponents(blocks, emax):
    amax = blocks.abs().amax(-1)
    _, exp = torch.frexp(amax)  # amax = m * 2^exp, m in [0.5, 1)
    return torch.where(amax > 0, exp - 1 - emax, torch.full_like(exp, -127)).clamp(-127, 127)


def fp4_code(value, grid, mode):
    magnitude = min(abs(value), grid[-1])
    if mode == "floor":
        candidates = [i for i, g in enumerate(grid) if (g <= magnitude if value >= 0 else g >= magnitude)]
        code = max(candidates) if value >= 0 else min(candidates)
    else:
        best = min(abs(g - magnitude) for g in grid)
        ties = [i for i, g in enumerate(grid) if abs(g - magnitude) == best]
        code = ties[0] if len(ties) == 1 else (ties[-1] if mode == "round" else next(i for i in ties if i % 2 == 0))
    return code | 8 if value < 0 and code else code


def dynamic_range_exponents(blocks, dst_type_max):
    """scale_alg 2: the smallest power of two >= amax / dst_type_max (a float32 quotient), 2^-127 below float32's
    normal range."""
    ratios = (blocks.abs().amax(-1) / (dst_type_max or 6.0)).flatten().tolist()  # float32 quotients
    exps = []
    for r in ratios:
        mantissa, exp = math.frexp(r)
        exps.append(-127 if r < 2.0**-126 else min(exp - 1 if mantissa == 0.5 else exp, 127))
    return torch.tensor(exps).reshape(blocks.shape[:-1])


def reference(x, axis, dst, mode, block=32, dst_type_max=None):
    emax = {"e2m1": 2, "e1m2": 0, torch.float8_e5m2: 15, torch.float8_e4m3fn: 8}[dst]
    moved = x.float().movedim(axis, -1)
    n = moved.shape[-1]
    groups = math.ceil(n / block)
    blocks = torch.nn.functional.pad(moved, (0, groups * block - n)).reshape(*moved.shape[:-1], groups, block)
    exps = shared_exponents(blocks, emax) if dst_type_max is None else dynamic_range_exponents(blocks, dst_type_max)
    scaled = (blocks / torch.exp2(exps.float())[..., None]).reshape(*moved.shape[:-1], -1)[..., :n].movedim(-1, axis)
    if isinstance(dst, str):
        grid = E2M1 if dst == "e2m1" else E1M2
        codes = torch.tensor([fp4_code(v, grid, mode) for v in scaled.flatten().tolist()]).reshape(scaled.shape)
        y = (codes[..., 0::2] | codes[..., 1::2] << 4).to(torch.uint8)
    else:
        big = torch.finfo(dst).max
        y = scaled.clamp(-big, big).to(dst)
    flat = (exps + 127).to(torch.uint8)  # [..., groups] with the axis last
    pairs = torch.zeros(*flat.shape[:-1], (groups + 1) // 2, 2, dtype=torch.uint8)
    for g in range(groups):
        pairs[..., g // 2, g % 2] = flat[..., g]
    return y, pairs.movedim(-2, axis if axis >= 0 else axis - 1)


@pytest.mark.parametrize("dst_type, dst", [(291, torch.float8_e5m2), (292, torch.float8_e4m3fn)])
@pytest.mark.parametrize("axis", [-1, 0])
def test_fp8(dst_type, dst, axis):
    x = (torch.randn(70, 96) * torch.logspace(-3, 3, 96)).bfloat16()
    x[:, 5] = 0  # an all-zero block along axis 0
    y, scale = torch_npu.npu_dynamic_mx_quant(x.npu(), axis=axis, dst_type=dst_type)
    want_y, want_scale = reference(x, axis, dst, "rint")
    assert y.dtype == dst and torch.equal(y.cpu().float(), want_y.float())
    assert torch.equal(scale.cpu(), want_scale)


@pytest.mark.parametrize("dst_type, grid", [(296, "e2m1"), (297, "e1m2")])
@pytest.mark.parametrize("mode", ["rint", "round", "floor"])
def test_fp4(dst_type, grid, mode):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 64, generator=g) * 3
    x[0, :8] = torch.tensor([0.25, 0.75, -0.75, 1.25, 2.5, -2.5, 5.0, 7.0])  # ties and values past the grid
    y, scale = torch_npu.npu_dynamic_mx_quant(x.npu(), round_mode=mode, dst_type=dst_type)
    want_y, want_scale = reference(x, -1, grid, mode)
    assert y.shape == (4, 32) and torch.equal(y.cpu(), want_y) and torch.equal(scale.cpu(), want_scale)


def test_bad_arguments():
    x = torch.randn(2, 64).npu()
    raises_operator_error(
        lambda: torch_npu.npu_dynamic_mx_quant(x, dst_type=292, round_mode="floor"),
        "npu_dynamic_mx_quant: round_mode 'floor' is not supported with this dst_type (rint)",
    )
    for scale_alg, dst_type in ((1, 296), (2, 292), (2, 297)):
        raises_operator_error(
            functools.partial(torch_npu.npu_dynamic_mx_quant, x, scale_alg=scale_alg, dst_type=dst_type),
            f"npu_dynamic_mx_quant: scale_alg={scale_alg} is not supported with this dst_type (0, the OCP rule, for "
            "every dst_type; 1, cuBLAS's, for FP8 outputs; 2, the dynamic dtype range, for float4_e2m1 outputs)",
        )
    for kwargs in (
        {"dst_type_max": 6.0},
        {"scale_alg": 2, "dst_type_max": 5.0},
        {"scale_alg": 2, "dst_type_max": 13.0},
    ):
        raises_operator_error(
            functools.partial(torch_npu.npu_dynamic_mx_quant, x, **kwargs),
            f"npu_dynamic_mx_quant: dst_type_max must be 0.0, or 6.0 to 12.0 with scale_alg=2, got {kwargs['dst_type_max']}",
        )
    raises_operator_error(
        lambda: torch_npu.npu_dynamic_mx_quant(x, scale_alg=2, block_size=64),
        "npu_dynamic_mx_quant: block_size must be 32 with scale_alg=2, got 64",
    )
    raises_operator_error(
        lambda: torch_npu.npu_dynamic_mx_quant(x, max_low_bound=1.0),
        "npu_dynamic_mx_quant: max_low_bound is not computed by vnpu",
    )
    raises_operator_error(
        lambda: torch_npu.npu_dynamic_mx_quant(x, block_size=48),
        "npu_dynamic_mx_quant: block_size must be a multiple of 32 in [32, 1024], got 48",
    )
    raises_operator_error(
        lambda: torch_npu.npu_dynamic_mx_quant(x, dst_type=1),
        "npu_dynamic_mx_quant: dst_type must be 291, 292, 296 or 297 (float8_e5m2, float8_e4m3fn, "
        "float4_e2m1fn_x2, float4_e1m2fn_x2), got 1",
    )


@pytest.mark.parametrize("kwargs", [{}, {"dst_type": 291, "axis": 0}, {"dst_type": 292, "block_size": 64}])
def test_fake_shapes_match_and_compiled_calls_agree(kwargs):
    x = torch.randn(66, 128).npu()
    real = torch_npu.npu_dynamic_mx_quant(x, **kwargs)
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake = torch_npu.npu_dynamic_mx_quant(mode.from_tensor(x), **kwargs)
    assert [(t.shape, t.dtype) for t in fake] == [(t.shape, t.dtype) for t in real]
    torch._dynamo.reset()
    compiled = torch.compile(
        lambda t: torch_npu.npu_dynamic_mx_quant(t, **kwargs), backend="aot_eager", fullgraph=True
    )(x)
    assert all(torch.equal(a.cpu().view(torch.uint8), b.cpu().view(torch.uint8)) for a, b in zip(real, compiled))


def _decode_reference(y, scale_pairs, axis, src):
    """Values of the quantised blocks: FP8 as floats, FP4 nibbles through the grid; times 2^(scale - 127)."""
    if isinstance(src, str):
        grid = E2M1 if src == "e2m1" else E1M2
        nibbles = torch.stack([y & 0xF, y >> 4], -1).reshape(*y.shape[:-1], -1).long()
        values = torch.tensor([(-1 if n & 8 else 1) * grid[n & 7] for n in nibbles.flatten().tolist()]).reshape(
            nibbles.shape
        )
    else:
        values = y.float()
    moved = values.movedim(axis, -1)
    pairs = scale_pairs.movedim(axis if axis >= 0 else axis - 1, -2)
    exps = [[int(v) - 127 for v in row] for row in pairs.reshape(-1, pairs.shape[-2] * 2).tolist()]
    flat = moved.reshape(-1, moved.shape[-1]).clone()
    for r, row in enumerate(exps):
        for i in range(flat.shape[1]):
            flat[r, i] *= 2.0 ** row[i // 32]
    return flat.reshape(moved.shape).movedim(-1, axis)


@pytest.mark.parametrize(
    "src_type, src, axis",
    [(291, torch.float8_e5m2, -1), (291, torch.float8_e5m2, 0), (292, torch.float8_e4m3fn, -1),
     (292, torch.float8_e4m3fn, 0), (296, "e2m1", -1), (297, "e1m2", -1)],
)  # fmt: skip
def test_anti_mx_quant_decodes_what_mx_quant_encoded(src_type, src, axis):
    x = torch.randn(64, 40) * 30
    y, scale = torch_npu.npu_dynamic_mx_quant(x.npu(), axis=axis, dst_type=src_type)
    got = torch_npu.npu_anti_mx_quant(y, scale, axis=axis, dst_type=6, src_type=src_type)
    want = _decode_reference(y.cpu(), scale.cpu(), axis, src)
    assert got.dtype == torch.float32 and torch.equal(got.cpu(), want)
    assert torch_npu.npu_anti_mx_quant(y, scale, axis=axis, src_type=src_type).dtype == torch.bfloat16


@pytest.mark.parametrize("dst, top", [(torch.float8_e4m3fn, 448.0), (torch.float8_e5m2, 57344.0)])
def test_cublas_scale_rule_for_fp8(dst, top):
    """scale_alg 1: scale = the smallest power of two >= amax / the format's largest value, so nothing saturates."""
    g = torch.Generator().manual_seed(9)
    x = torch.randn(3, 96, generator=g) * torch.tensor([1e-3, 1.0, 1e3])[:, None]
    x[1, :32] = 0.0  # an all-zero block
    x[2, 32] = top * 4  # a block whose amax / top is exactly a power of two
    y, scale = torch_npu.npu_dynamic_mx_quant(x.npu(), dst_type=dst, scale_alg=1)
    blocks = x.reshape(3, 3, 32)
    amax = blocks.abs().amax(-1)
    exps = torch.tensor([[math.ceil(math.log2(a / top)) if a > 0 else -127 for a in row] for row in amax.tolist()])
    flat = scale.cpu().reshape(3, -1)[:, :3].long() - 127
    assert torch.equal(flat, exps)
    want = (blocks / torch.exp2(exps.float())[..., None]).reshape(3, 96).to(dst)
    assert torch.equal(y.cpu().view(torch.uint8), want.view(torch.uint8))


@pytest.mark.parametrize("dst_type_max", [0.0, 6.0, 7.0, 9.5])
@pytest.mark.parametrize("mode", ["rint", "floor"])
def test_dynamic_dtype_range_scale_rule_for_e2m1(dst_type_max, mode):
    """scale_alg 2: scale = the smallest power of two >= amax / dst_type_max (6.0 when 0)."""
    g = torch.Generator().manual_seed(11)
    x = torch.randn(4, 160, generator=g) * torch.tensor([1e-2, 1.0, 30.0, 1e3])[:, None]
    x[0, :32] = 0.0  # an all-zero block
    x[1, 32:64] = torch.linspace(-6.5, 6.5, 32)  # amax 6.5: scale 2 against 6.0, 1 against 7.0
    x[2, 64:96] = torch.linspace(-7.0, 7.0, 32)  # amax exactly 7.0
    x[3, 96:128] = 1e-38  # amax / dst_type_max below float32's normal range: scale 2^-127
    y, scale = torch_npu.npu_dynamic_mx_quant(x.npu(), dst_type=296, scale_alg=2, dst_type_max=dst_type_max,
                                              round_mode=mode)  # fmt: skip
    want_y, want_scale = reference(x, -1, "e2m1", mode, dst_type_max=dst_type_max)
    assert torch.equal(scale.cpu(), want_scale) and torch.equal(y.cpu(), want_y)
    top = dst_type_max or 6.0
    assert scale.cpu()[1, 0, 1].item() - 127 == (0 if top >= 6.5 else 1)
    assert scale.cpu()[2, 1, 0].item() - 127 == (0 if top >= 7.0 else 1)
    assert scale.cpu()[3, 1, 1].item() == 0 and scale.cpu()[0, 0, 0].item() == 0
