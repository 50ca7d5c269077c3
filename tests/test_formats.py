"""Private formats: tensors keep values and logical shape, carry their format, and occupy the
physical storage torch_npu would give them."""

import math

import pytest
import torch
from error_cases import NPU, raises_exactly, t

import torch_npu
from torch_npu import Format


def test_format_enum_values_and_names():
    assert (Format.NCHW, Format.ND, Format.NC1HWC0, Format.FRACTAL_Z, Format.FRACTAL_NZ, Format.NCDHW) == (
        0,
        2,
        3,
        4,
        29,
        30,
    )
    assert str(Format.FRACTAL_NZ) == "FRACTAL_NZ"


@pytest.mark.parametrize(
    "shape,expected",
    [
        ((5,), Format.ND),
        ((3, 4), Format.ND),
        ((2, 3, 4), Format.ND),
        ((2, 3, 4, 5), Format.NCHW),
        ((1, 2, 3, 4, 5), Format.NCDHW),
    ],
)
def test_default_format_by_rank(shape, expected):
    assert torch_npu.get_npu_format(torch.empty(shape, device="npu")) == expected


@pytest.mark.parametrize("dtype,c0", [(torch.float32, 16), (torch.float16, 16), (torch.int8, 32)])
def test_fractal_nz_storage_shape(dtype, c0):
    x = torch.ones(3, 33, 17, device="npu").to(dtype)
    y = torch_npu.npu_format_cast(x, Format.FRACTAL_NZ)
    assert torch_npu.get_npu_format(y) == 29
    assert torch_npu.get_storage_size(y) == math.prod([3, math.ceil(17 / c0), math.ceil(33 / 16), 16, c0])
    assert y.shape == x.shape and y.stride() == x.stride() and torch.equal(y.cpu(), x.cpu())


def test_nc1hwc0_and_fractal_z_storage_shapes():
    w = torch.randn(8, 3, 5, 5, device="npu")
    assert torch_npu.get_storage_size(torch_npu.npu_format_cast(w, 3)) == math.prod([8, 1, 5, 5, 16])
    assert torch_npu.get_storage_size(torch_npu.npu_format_cast(w, 4)) == math.prod([25, 1, 16, 16])
    v = torch.randn(2, 20, 3, 4, 5, device="npu")
    assert torch_npu.get_storage_size(torch_npu.npu_format_cast(v, Format.NDC1HWC0)) == math.prod([2, 3, 2, 4, 5, 16])


def test_cast_allocates_the_physical_size():
    x = torch.randn(1, 16, device="npu")
    before = torch.npu.memory_allocated()
    y = torch_npu.npu_format_cast(x, 29)
    # [1, 16] in NZ pads the rows to 16: 16 x 16 floats
    assert torch.npu.memory_allocated() - before >= 16 * 16 * 4
    assert torch.equal(y.cpu(), x.cpu())


def test_nz_on_rank_one_falls_back_to_nd_with_warning():
    with pytest.warns(UserWarning, match="Cannot create tensor with NZ format while dim < 2"):
        y = torch_npu.npu_format_cast(torch.ones(7, device="npu"), 29)
    assert torch_npu.get_npu_format(y) == Format.ND


def test_inplace_cast_and_cast_like():
    x = torch.randn(4, 5, device="npu")
    values = x.cpu()
    assert torch_npu.npu_format_cast_(x, 29) is x
    assert torch_npu.get_npu_format(x) == 29 and torch.equal(x.cpu(), values)
    z = torch.zeros(6, 6, device="npu")
    torch_npu.npu_format_cast_(z, x)
    assert torch_npu.get_npu_format(z) == 29
    like = torch_npu.npu_format_cast(torch.ones(2, 2, device="npu"), x)
    assert torch_npu.get_npu_format(like) == 29
    assert torch_npu.get_npu_format(x.npu_format_cast(2)) == 2


def test_results_of_operators_on_cast_tensors_match_the_cpu():
    a = torch.randn(16, 32)
    b = torch.randn(32, 8)
    got = torch_npu.npu_format_cast(a.npu(), 29) @ torch_npu.npu_format_cast(b.npu(), 29)
    assert torch.equal(got.cpu(), a @ b)


def test_cast_is_differentiable():
    w = torch.randn(4, 3, 2, 2, device="npu", requires_grad=True)
    (torch_npu.npu_format_cast(w, 4) * 3).sum().backward()
    assert torch.equal(w.grad.cpu(), torch.full((4, 3, 2, 2), 3.0))


def test_empty_with_format():
    e = torch_npu.empty_with_format((4, 5), dtype=torch.float16, device="npu", acl_format=29)
    assert e.shape == (4, 5) and e.dtype == torch.float16
    assert torch_npu.get_storage_size(e) == math.prod([1, 1, 16, 16])
    with pytest.raises(RuntimeError, match="makes npu tensors"):
        torch_npu.empty_with_format((2,), device="cpu")


@pytest.mark.parametrize("bad", [77, -1, 1000])
def test_cast_to_unknown_format_is_refused(bad):
    with pytest.raises(RuntimeError, match=r"not an NPU format|Format.UNDEFINED[\s\S]*ERR01001 OPS invalid parameter"):
        torch_npu.npu_format_cast(torch.ones(2, 2, device="npu"), bad)


def test_format_rank_constraints():
    with pytest.raises(RuntimeError, match="needs a 5-D tensor"):
        torch_npu.npu_format_cast(torch.ones(2, 2, device="npu"), Format.NDC1HWC0)
    with pytest.raises(RuntimeError, match="at most 4 dimensions"):
        torch_npu.npu_format_cast(torch.ones(1, 1, 1, 1, 2, device="npu"), Format.NC1HWC0)
    with pytest.raises(RuntimeError, match="expects an npu tensor"):
        torch_npu.npu_format_cast(torch.ones(2, 2), 29)


def test_format_survives_save_and_copy_to_cpu(tmp_path):
    x = torch_npu.npu_format_cast(torch.randn(4, 4, device="npu"), 29)
    path = tmp_path / "t.pt"
    torch.save(x, path)
    assert torch.equal(torch.load(path).cpu(), x.cpu())


# Bad input: the exact first line of the error (torch_npu's "[ERROR] ... ERRxxyyy" suffix follows it)
FORMAT_ERRORS = [
    (lambda: torch_npu.npu_format_cast(t(2, 2), -1), RuntimeError, "npu_format_cast: cannot cast to Format.UNDEFINED"),
    (
        lambda: torch_npu.npu_format_cast(t(2, 2), 32),
        RuntimeError,
        "npu_format_cast: format NDC1HWC0 needs a 5-D tensor, got 2-D",
    ),
    (
        lambda: torch_npu.npu_format_cast(t(1, 1, 1, 1, 2), 3),
        RuntimeError,
        "npu_format_cast: format NC1HWC0 needs at most 4 dimensions, got 5",
    ),
    (
        lambda: torch_npu.npu_format_cast(torch.ones(2, 2), 29),
        RuntimeError,
        "npu_format_cast expects an npu tensor, got one on cpu",
    ),
    (
        lambda: torch_npu.empty_with_format((2,), layout=torch.sparse_coo, device=NPU),
        RuntimeError,
        "empty_with_format supports torch.strided only, got torch.sparse_coo",
    ),
    (
        lambda: torch_npu.empty_with_format((2,), device="cpu"),
        RuntimeError,
        "empty_with_format makes npu tensors, got device cpu",
    ),
]


@pytest.mark.parametrize("call,kind,message", FORMAT_ERRORS, ids=[c[2][:48] for c in FORMAT_ERRORS])
def test_format_error_message(call, kind, message):
    raises_exactly(call, kind, message)


def test_format_rules_follow_the_storage_descriptor():
    # a 1-D view of a [32, 64] tensor keeps its base's 2-D descriptor: NZ is allowed
    flat = torch.randn(32, 64, device="npu").reshape(-1)
    nz = torch_npu.npu_format_cast(flat, 29)
    assert torch_npu.get_npu_format(nz) == 29 and torch.equal(nz.cpu(), flat.cpu())
    assert torch_npu.get_storage_size(nz) == 32 * 64 and isinstance(torch_npu.get_storage_size(nz), int)
    # a tensor set_() onto a fresh storage has a 1-D descriptor: ND, with torch_npu's warning
    owner = torch.empty(0, device="npu").set_(torch.empty(64, device="npu").untyped_storage())
    with pytest.warns(UserWarning, match="dim < 2"):
        assert torch_npu.get_npu_format(torch_npu.npu_format_cast(owner, 29)) == 2
    # a storage made on its own (torch.UntypedStorage) has torch_npu's one-dimension-of-bytes descriptor, so a 2-D
    # tensor set_() onto it lays out as that descriptor says (torch_npu's test_tensor_set_with_new_storage)
    fresh = torch.UntypedStorage(64, device="npu")
    fresh.copy_(torch.arange(16.0).untyped_storage())
    square = torch.empty([], device="npu").set_(fresh, 0, [4, 4], [4, 1])
    assert torch.equal(square.cpu(), torch.arange(16.0).view(4, 4))
    with pytest.warns(UserWarning, match="dim < 2"):
        assert torch_npu.get_npu_format(torch_npu.npu_format_cast(square, 29)) == 2


def test_casting_to_the_current_format_keeps_the_storage():
    z = torch_npu.npu_format_cast(torch.randn(4, 16, device="npu"), 29)
    same = torch_npu.npu_format_cast(z, 29)
    assert same.untyped_storage().data_ptr() == z.untyped_storage().data_ptr()
    assert torch_npu.npu_format_cast(z, 2).untyped_storage().data_ptr() != z.untyped_storage().data_ptr()
    assert torch_npu.utils.is_combined_tensor_valid(z, []) is True


def test_a_cast_between_base_formats_relabels_the_same_storage():
    # torch_npu's format_cast_as_base_format: ND / NCHW / NHWC / NCDHW at any rank, the source relabelled too
    x = torch.randn(1, 2, 3, 6, 6, device="npu")
    values = x.cpu()
    y = torch_npu.npu_format_cast(x, 0)  # a 5-D tensor labelled NCHW, as create_common_tensor makes them
    assert y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr() and torch.equal(y.cpu(), values)
    assert torch_npu.get_npu_format(y) == torch_npu.get_npu_format(x) == 0
    m = torch.randn(3, 4, device="npu")
    assert torch_npu.npu_format_cast_(m, 1) is m and torch_npu.get_npu_format(m) == 1
    assert torch_npu._C._tensor_construct_from_storage(m.untyped_storage()).shape == (3, 4)
    with pytest.raises(RuntimeError, match="^npu_format_cast: format NC1HWC0 needs at most 4 dimensions, got 5"):
        torch_npu.npu_format_cast(y, 3)  # not a base format: a real cast with its rank rules


def test_formats_survive_save_load_and_deepcopy(tmp_path):
    import copy

    x = torch_npu.npu_format_cast(torch.randn(4, 16, device="npu"), 29)
    torch.save({"w": x}, tmp_path / "w.pt")
    loaded = torch.load(tmp_path / "w.pt")["w"]
    copied = copy.deepcopy(x)
    for y in (loaded, copied):
        assert torch_npu.get_npu_format(y) == 29 and torch.equal(y.cpu(), x.cpu())
        assert torch_npu.get_storage_size(y) == torch_npu.get_storage_size(x)
    plain = torch.randn(3, device="npu")
    torch.save(plain, tmp_path / "p.pt")
    assert torch_npu.get_npu_format(torch.load(tmp_path / "p.pt")) == 2


def test_formats_survive_the_legacy_save_format(tmp_path):
    x = torch_npu.npu_format_cast(torch.randn(2, 3, 8, 8, device="npu"), 3)
    torch.save(x, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    loaded = torch.load(tmp_path / "legacy.pt", weights_only=False)
    assert torch_npu.get_npu_format(loaded) == 3 and torch.equal(loaded.cpu(), x.cpu())


def test_clone_of_a_whole_formatted_tensor_keeps_format_and_storage_size():
    x = torch_npu.npu_format_cast(torch.randn(4, 4, device="npu"), 29)
    c = x.clone()
    assert torch_npu.get_npu_format(c) == 29 and torch.equal(c.cpu(), x.cpu())
    assert c.untyped_storage().nbytes() == x.untyped_storage().nbytes() and c.data_ptr() != x.data_ptr()
    assert torch_npu.get_npu_format(x[:2].clone()) == 2  # a part of the tensor is a new ND tensor


def test_module_deepcopy_keeps_parameter_formats():
    import copy

    model = torch.nn.Linear(16, 16).npu()
    model.weight.data = torch_npu.npu_format_cast(model.weight.data, 29)
    copied = copy.deepcopy(model)
    assert torch_npu.get_npu_format(copied.weight) == 29 and torch_npu.get_npu_format(copied.bias) == 2
    assert torch.equal(copied.weight.cpu(), model.weight.cpu()) and copied.weight.requires_grad


def test_cast_takes_customize_dtype_by_position_as_torch_npu_does():
    import inspect

    assert str(inspect.signature(torch_npu.npu_format_cast)) == "(self, acl_format, customize_dtype=None)"
    packed = torch.randint(-8, 8, (64, 32), dtype=torch.int8)
    for cast in (torch_npu.npu_format_cast(packed.npu(), 29, torch.int8), packed.npu().npu_format_cast(29, torch.int8)):
        assert torch_npu.get_npu_format(cast) == 29 and torch.equal(cast.cpu(), packed)
    like = torch_npu.npu_format_cast(torch.ones(4, 4, device="npu"), cast)
    assert torch_npu.get_npu_format(like) == 29
