"""torch_npu's quantisation and quantised matmuls: npu_quant_matmul, npu_weight_quant_batchmatmul, npu_dynamic_quant,
npu_anti_quant, npu_quantize, the int4 packing, npu_grouped_matmul (plain, quantised, antiquant) and npu_linear's
errors — each against integer arithmetic written here."""

import math

import pytest
import torch
from error_cases import int8_zeros, raises_operator_error, t
from op_check import check_op

import torch_npu


def test_npu_quant_matmul_integer_semantics():
    g = torch.Generator().manual_seed(0)
    x1 = torch.randint(-128, 128, (3, 16), generator=g, dtype=torch.int8)
    x2 = torch.randint(-128, 128, (16, 4), generator=g, dtype=torch.int8)
    bias = torch.randint(-1000, 1000, (4,), generator=g, dtype=torch.int32)
    scale, pertoken = torch.rand(4, generator=g) * 1e-3, torch.rand(3, generator=g) + 0.5

    def acc():
        return [
            [sum(int(x1[i, k]) * int(x2[k, j]) for k in range(16)) + int(bias[j]) for j in range(4)] for i in range(3)
        ]

    def ref_fp16(x1, x2, scale, bias, pertoken_scale, output_dtype):
        return (torch.tensor(acc(), dtype=torch.float64) * scale.double() * pertoken_scale.double()[:, None]).half()

    check_op(
        torch_npu.npu_quant_matmul,
        (x1, x2, scale),
        ref_fp16,
        kwargs={"bias": bias, "pertoken_scale": pertoken, "output_dtype": torch.float16},
        atol=1e-3,
        rtol=1e-3,
    )
    int32 = torch_npu.npu_quant_matmul(x1.npu(), x2.npu(), scale.npu(), bias=bias.npu(), output_dtype=torch.int32)
    assert int32.cpu().tolist() == acc()
    int8 = torch_npu.npu_quant_matmul(x1.npu(), x2.npu(), scale.npu() * 0 + 0.01, bias=bias.npu())
    expected = (torch.tensor(acc(), dtype=torch.float64) * 0.01).round().clamp(-128, 127).to(torch.int8)
    assert torch.equal(int8.cpu(), expected)
    with pytest.raises(RuntimeError, match=r"x1 and x2 must be int8 \(A8W8\) or int32 holding int4 \(A4W4\)"):
        torch_npu.npu_quant_matmul(x1.float().npu(), x2.float().npu(), scale.npu())


@pytest.mark.parametrize("group", [0, 4])
def test_npu_weight_quant_batchmatmul(group):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 8, generator=g)
    w = torch.randint(-8, 8, (8, 3), generator=g, dtype=torch.int8)
    scale = torch.rand(3, generator=g) if group == 0 else torch.rand(2, 3, generator=g)
    offset = torch.randn(scale.shape, generator=g)
    bias = torch.randn(3, generator=g)

    def ref(x, w, scale, offset, bias, group):
        s = scale if group == 0 else scale.repeat_interleave(group, 0)
        o = offset if group == 0 else offset.repeat_interleave(group, 0)
        return x @ ((w.float() + o) * s) + bias

    check_op(
        lambda x, w, s, o, b, group: torch_npu.npu_weight_quant_batchmatmul(
            x, w, s, o, bias=b, antiquant_group_size=group
        ),
        (x, w, scale, offset, bias),
        ref,
        kwargs={"group": group},
        atol=1e-5,
        rtol=1e-4,
    )


@pytest.mark.parametrize("transposed", [False, True])
def test_npu_weight_quant_batchmatmul_reads_int4_packed_weights(transposed):
    g = torch.Generator().manual_seed(2)
    x = torch.randn(16, 64, generator=g, dtype=torch.float16)
    w = torch.randint(-8, 8, (64, 32), generator=g, dtype=torch.int32)  # [k, n]
    scale, offset = torch.randn(1, 32, generator=g).half(), torch.randn(1, 32, generator=g).half()
    # packed along the contiguous dimension: [k, n // 8], or [n, k // 8] passed transposed
    pack = torch_npu.npu_convert_weight_to_int4pack
    packed = pack(w.t().contiguous().npu()).t() if transposed else pack(w.npu())
    assert packed.shape == ((8, 32) if transposed else (64, 4))
    got = torch_npu.npu_weight_quant_batchmatmul(x.npu(), packed, scale.npu(), offset.npu())
    want = torch_npu.npu_weight_quant_batchmatmul(x.npu(), w.to(torch.int8).npu(), scale.npu(), offset.npu())
    assert got.dtype == torch.float16 and torch.equal(got.cpu(), want.cpu())
    reference = (x.float() @ ((w.half() + offset) * scale).float()).half()
    torch.testing.assert_close(got.cpu(), reference, atol=0.05, rtol=1e-3)


def test_npu_dynamic_quant_and_anti_quant():
    x = torch.randn(4, 32)
    smooth = torch.rand(32) + 0.5

    def ref(x, smooth_scales=None):
        xs = x * smooth_scales
        scale = xs.abs().amax(-1) / 127
        return (xs / scale[:, None]).round().clamp(-128, 127).to(torch.int8), scale

    y, scale = check_op(torch_npu.npu_dynamic_quant, (x,), ref, kwargs={"smooth_scales": smooth})
    back = torch_npu.npu_anti_quant(y, scale[:, None], dst_dtype=torch.float32)
    torch.testing.assert_close(back.cpu(), x * smooth, atol=float(scale.max()) / 2 + 1e-6, rtol=0)


def test_npu_quantize():
    x = torch.randn(2, 3, 4)
    scales, zps = torch.tensor([0.1, 0.2, 0.05]), torch.tensor([1.0, -2.0, 0.0])

    def ref(x, scales, zps, dtype, axis=1, div_mode=True):
        return (x / scales[None, :, None] + zps[None, :, None]).round().clamp(-128, 127).to(torch.int8)

    check_op(torch_npu.npu_quantize, (x, scales, zps, torch.qint8), ref, kwargs={"axis": 1})
    with pytest.raises(RuntimeError, match="dtype"):
        torch_npu.npu_quantize(x.npu(), scales.npu(), zps.npu(), torch.float32)


def test_npu_quantize_to_quint4x2_packs_eight_int4_per_int32():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(3, 16, generator=g) * 4
    scales = torch.rand(16, generator=g) + 0.5
    packed = torch_npu.npu_quantize(x.npu(), scales.npu(), None, torch.quint4x2, -1)
    assert packed.shape == (3, 2) and packed.dtype == torch.int32
    want = (x / scales).round().clamp(-8, 7).to(torch.int8)
    # the packing npu_anti_quant and npu_convert_weight_to_int4pack read: the first value in the lowest nibble
    assert torch.equal(torch_npu.npu_anti_quant(packed, torch.ones(16).npu()).cpu(), want.half())
    with torch._subclasses.FakeTensorMode(allow_non_fake_inputs=True):
        traced = torch_npu.npu_quantize(x.npu(), scales.npu(), None, torch.quint4x2, -1)
        assert traced.shape == (3, 2) and traced.dtype == torch.int32
    with pytest.raises(RuntimeError, match="If dtype is quint4x2, last dim must be divided by 8"):
        torch_npu.npu_quantize(x[:, :12].npu(), scales[:12].npu(), None, torch.quint4x2, -1)


def test_npu_convert_weight_to_int4pack():
    w = torch.tensor([[1, 2, 3, 4, 5, 6, 7, -1], [0, 0, 0, 0, 0, 0, 0, -8]], dtype=torch.int32)
    out = torch_npu.npu_convert_weight_to_int4pack(w.npu()).cpu()
    expected = []
    for row in w.tolist():
        v = sum((n & 0xF) << (4 * i) for i, n in enumerate(row))
        expected.append([v - 2**32 if v >= 2**31 else v])
    assert out.tolist() == expected
    with pytest.raises(RuntimeError, match="multiple of 8"):
        torch_npu.npu_convert_weight_to_int4pack(torch.zeros(2, 6, dtype=torch.int32, device="npu"))


def test_npu_grouped_matmul_list_and_group_list_forms():
    xs = [torch.randn(3, 4), torch.randn(2, 5)]
    ws = [torch.randn(4, 6), torch.randn(5, 2)]
    bs = [torch.randn(6), torch.randn(2)]
    outs = torch_npu.npu_grouped_matmul([x.npu() for x in xs], [w.npu() for w in ws], bias=[b.npu() for b in bs])
    for o, x, w, b in zip(outs, xs, ws, bs):
        torch.testing.assert_close(o.cpu(), x @ w + b)
    x = torch.randn(7, 4)
    ws = [torch.randn(4, 3) for _ in range(3)]
    for group_list, group_list_type in (([2, 5, 7], 0), ([2, 3, 2], 1)):
        (out,) = torch_npu.npu_grouped_matmul(
            [x.npu()],
            [w.npu() for w in ws],
            group_list=torch.tensor(group_list).npu(),
            split_item=3,
            group_type=0,
            group_list_type=group_list_type,
        )
        expected = torch.cat([x[:2] @ ws[0], x[2:5] @ ws[1], x[5:] @ ws[2]])
        torch.testing.assert_close(out.cpu(), expected)
    compiled = torch.compile(
        lambda a, w0, w1, w2, gl: torch_npu.npu_grouped_matmul(
            [a], [w0, w1, w2], group_list=gl, split_item=3, group_type=0
        )[0],
        backend="aot_eager",
    )
    torch.testing.assert_close(
        compiled(x.npu(), *[w.npu() for w in ws], torch.tensor([2, 5, 7]).npu()).cpu(),
        torch.cat([x[:2] @ ws[0], x[2:5] @ ws[1], x[5:] @ ws[2]]),
    )
    with pytest.raises(RuntimeError, match="do not chain"):
        torch_npu.npu_grouped_matmul([torch.randn(2, 3, device="npu")], [torch.randn(4, 2, device="npu")])


def test_npu_grouped_matmul_quantised_with_group_list_and_per_token_scale():
    g = torch.Generator().manual_seed(3)
    x = torch.randint(-128, 128, (7, 16), generator=g, dtype=torch.int8)
    ws = [torch.randint(-128, 128, (16, 4), generator=g, dtype=torch.int8) for _ in range(2)]
    scales = [torch.rand(4, generator=g) * 1e-3 for _ in range(2)]
    biases = [torch.randint(-500, 500, (4,), generator=g, dtype=torch.int32) for _ in range(2)]
    token_scale = torch.rand(7, generator=g) + 0.5
    sizes = [3, 4]

    def expected(output_dtype):
        rows, start = [], 0
        for i, n in enumerate(sizes):
            acc = [
                [sum(int(x[r, k]) * int(ws[i][k, c]) for k in range(16)) + int(biases[i][c]) for c in range(4)]
                for r in range(start, start + n)
            ]
            value = (
                torch.tensor(acc, dtype=torch.float64)
                * scales[i].double()
                * token_scale[start : start + n, None].double()
            )
            rows.append(
                value.round().clamp(-128, 127).to(torch.int8) if output_dtype is None else value.to(output_dtype)
            )
            start += n
        return torch.cat(rows)

    for output_dtype in (None, torch.float16, torch.bfloat16):
        (out,) = torch_npu.npu_grouped_matmul(
            [x.npu()],
            [w.npu() for w in ws],
            bias=[b.npu() for b in biases],
            scale=[s.npu() for s in scales],
            per_token_scale=[token_scale.npu()],
            group_list=torch.tensor(sizes).npu(),
            group_list_type=1,
            split_item=3,
            group_type=0,
            output_dtype=output_dtype,
        )
        assert out.dtype == (torch.int8 if output_dtype is None else output_dtype)
        assert torch.equal(out.cpu(), expected(output_dtype))
    fake = torch.compile(
        lambda a, w0, w1, s0, s1, gl: torch_npu.npu_grouped_matmul(
            [a], [w0, w1], scale=[s0, s1], group_list=gl, split_item=3, group_type=0, output_dtype=torch.float16
        )[0],
        backend="aot_eager",
        fullgraph=True,
    )
    got = fake(x.npu(), *(w.npu() for w in ws), *(s.npu() for s in scales), torch.tensor([3, 7]).npu())
    assert got.dtype == torch.float16 and got.shape == (7, 4)
    with pytest.raises(RuntimeError, match="must be int8"):
        torch_npu.npu_grouped_matmul([x.float().npu()], [ws[0].npu()], scale=[scales[0].npu()])


@pytest.mark.parametrize("groups", [1, 4])
def test_npu_grouped_matmul_weight_antiquant_and_activations(groups):
    g = torch.Generator().manual_seed(4)
    xs = [torch.randn(3, 8, generator=g), torch.randn(2, 8, generator=g)]
    ws = [torch.randint(-8, 8, (8, 5), generator=g, dtype=torch.int8) for _ in range(2)]
    shape = (5,) if groups == 1 else (groups, 5)
    scales = [torch.rand(shape, generator=g) for _ in range(2)]
    offsets = [torch.randn(shape, generator=g) for _ in range(2)]
    activations = {
        0: lambda y: y,
        1: lambda y: y.clamp(min=0),
        2: lambda y: 0.5 * y * (1 + torch.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y**3))),
        4: lambda y: y / (1 + torch.exp(-1.702 * y)),
        5: lambda y: y / (1 + torch.exp(-y)),
    }
    for act_type, act in activations.items():
        outs = torch_npu.npu_grouped_matmul(
            [x.npu() for x in xs],
            [w.npu() for w in ws],
            antiquant_scale=[s.npu() for s in scales],
            antiquant_offset=[o.npu() for o in offsets],
            act_type=act_type,
        )
        for out, x, w, sc, of in zip(outs, xs, ws, scales, offsets):
            rows_per_group = 8 // groups
            wf = torch.stack(
                [
                    (w[k].float() + of.reshape(groups, 5)[k // rows_per_group])
                    * sc.reshape(groups, 5)[k // rows_per_group]
                    for k in range(8)
                ]
            )
            torch.testing.assert_close(out.cpu(), act(x @ wf), atol=1e-4, rtol=1e-4)
    with pytest.raises(RuntimeError, match="act_type must be one of"):
        torch_npu.npu_grouped_matmul([xs[0].npu()], [xs[0].t().contiguous().npu()], act_type=3)


@pytest.mark.parametrize("split_item", [0, 3])
def test_npu_grouped_matmul_w4a16_reads_int4_packed_weights(split_item):
    # int32 weights hold eight int4 values along their memory: [k, n / 8] -> [k, n], as npu_weight_quant_batchmatmul.
    g = torch.Generator().manual_seed(6)
    xs = [torch.randn(7, 16, generator=g, dtype=torch.float16) for _ in range(2)]
    ws = [torch.randint(-8, 8, (16, 24), generator=g, dtype=torch.int32) for _ in range(2)]
    scales = [torch.rand(24, generator=g).half().npu() for _ in range(2)]
    packed = [torch_npu.npu_convert_weight_to_int4pack(w.npu()) for w in ws]
    assert packed[0].shape == (16, 3)
    x_npu = [x.npu() for x in xs] if split_item == 0 else [xs[0].npu()]
    kwargs = {"antiquant_scale": scales, "split_item": split_item}
    if split_item == 3:  # one x split along M: rows 0-2 to the first weight, 3-6 to the second
        kwargs.update(group_list=torch.tensor([3, 7]).npu(), group_type=0)
    got = torch_npu.npu_grouped_matmul(x_npu, packed, **kwargs)
    want = torch_npu.npu_grouped_matmul(x_npu, [w.to(torch.int8).npu() for w in ws], **kwargs)
    assert len(got) == len(want) and all(torch.equal(a.cpu(), b.cpu()) for a, b in zip(got, want))
    reference = (xs[0].float() @ (ws[0].float() * scales[0].cpu().float())).half()
    torch.testing.assert_close(got[0][:3].cpu(), reference[:3], atol=0.05, rtol=1e-3)
    with torch._subclasses.FakeTensorMode() as mode:
        fake = {k: [mode.from_tensor(t) for t in v] if isinstance(v, list) else v for k, v in kwargs.items()}
        if "group_list" in fake:
            fake["group_list"] = mode.from_tensor(fake["group_list"])
        traced = torch_npu.npu_grouped_matmul([mode.from_tensor(t) for t in x_npu], [mode.from_tensor(p) for p in packed],
                                              **fake)  # fmt: skip
        assert [t.shape for t in traced] == [t.shape for t in got]


def test_anti_quant_reads_int32_as_eight_packed_int4_values():
    values = torch.tensor([[0, 1, 2, 3, -8, -1, 7, -4], [5, -5, 6, -6, 4, -3, 2, -2]], dtype=torch.int32)
    packed = torch_npu.npu_convert_weight_to_int4pack(values.npu())
    assert packed.shape == (2, 1)
    scale = torch.linspace(0.5, 2.0, 8)
    out = torch_npu.npu_anti_quant(packed, scale.npu(), offset=torch.ones(8, device="npu"))
    assert out.dtype == torch.float16 and out.shape == (2, 8)
    assert torch.equal(out.cpu(), ((values.float() + 1) * scale).half())


INVALID_ARGUMENT_ERRORS = [
    (
        lambda: torch_npu.npu_anti_quant(t(4, dtype=torch.int8), t(4), dst_dtype=-10, src_dtype=torch.int8),
        "npu_anti_quant: Input dst_type must be valid, but got UNKNOWN_SCALAR",
    ),
    (
        lambda: torch_npu.npu_linear(t(2, 3), t(4, 5)),
        "npu_linear: input's last dim (3) must equal weight's in_features (5)",
    ),
    (
        lambda: torch_npu.npu_quant_matmul(int8_zeros(2, 3), int8_zeros(4, 5), t(5)),
        "npu_quant_matmul: x1 (2, 3) and x2 (4, 5) do not chain",
    ),
    (
        lambda: torch_npu.npu_quant_matmul(int8_zeros(2, 4), int8_zeros(4, 5), t(1, dtype=torch.float16)),
        "npu_quant_matmul: scale must be float32, int64 or bfloat16, got torch.float16",
    ),
    (
        lambda: torch_npu.npu_quant_matmul(int8_zeros(2, 4), int8_zeros(4, 5), t(1, dtype=torch.bfloat16)),
        "npu_quant_matmul: a torch.bfloat16 scale does not give torch.int8 output (scale dtypes for it: "
        "torch.float32, torch.int64)",
    ),
    (
        lambda: torch_npu.npu_quant_matmul(
            int8_zeros(2, 4), int8_zeros(4, 5), t(5), pertoken_scale=t(2), output_dtype=torch.int32
        ),
        "npu_quant_matmul: pertoken_scale needs output_dtype float16 or bfloat16, got torch.int32",
    ),
    (
        lambda: torch_npu.npu_quant_matmul(
            int8_zeros(2, 4),
            int8_zeros(4, 5),
            t(5),
            pertoken_scale=t(2, dtype=torch.float16),
            output_dtype=torch.float16,
        ),
        "npu_quant_matmul: pertoken_scale must be float32, got torch.float16",
    ),
    (
        lambda: torch_npu.npu_quant_matmul(
            int8_zeros(2, 4), int8_zeros(4, 5), t(5, dtype=torch.int64), pertoken_scale=t(2), output_dtype=torch.float16
        ),
        "npu_quant_matmul: pertoken_scale needs a float32 or bfloat16 scale, got torch.int64",
    ),
    (
        lambda: torch_npu.npu_quant_matmul(
            int8_zeros(2, 4), int8_zeros(4, 5), t(5), offset=t(5), output_dtype=torch.bfloat16
        ),
        "npu_quant_matmul: offset needs int8 output, got torch.bfloat16",
    ),
    (
        lambda: torch_npu.npu_weight_quant_batchmatmul(t(2, 3), int8_zeros(4, 5), t(5)),
        "npu_weight_quant_batchmatmul: x (2, 3) and weight (4, 5) do not chain",
    ),
    (
        lambda: torch_npu.npu_weight_quant_batchmatmul(t(2, 4), int8_zeros(4, 5), t(5), antiquant_group_size=2),
        "npu_weight_quant_batchmatmul: a group-wise antiquant_scale must be [ceil(k / group), n]",
    ),
    (
        lambda: torch_npu.npu_dynamic_quant(t(2, 4), quant_mode="perchannel"),
        "npu_dynamic_quant: quant_mode must be 'pertoken' or 'pertensor', got 'perchannel'",
    ),
    (
        lambda: torch_npu.npu_dynamic_quant(t(2, 4), dst_type=torch.int32),
        "npu_dynamic_quant: dst_type=3: vnpu quantises to torch.int8 or torch.quint4x2 (int4 packed in int32)",
    ),
    (
        lambda: torch_npu.npu_quantize(t(2, 2), t(2), None, torch.float32),
        "npu_quantize: dtype must be an 8- or 32-bit integer type, got torch.float32",
    ),
]


@pytest.mark.parametrize("call,message", INVALID_ARGUMENT_ERRORS, ids=[c[1][:56] for c in INVALID_ARGUMENT_ERRORS])
def test_invalid_argument_error_message(call, message):
    raises_operator_error(call, message)
