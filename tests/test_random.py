"""npu random numbers: per-device generators, reproducible per seed, independent of CPU draws."""

import pytest
import torch
import torch.utils.checkpoint
from subprocess_helpers import last_line, run_python


def draw(device="npu", **kwargs):
    return torch.randn(5, device=device, **kwargs).cpu()


def test_manual_seed_reproduces_npu_draws():
    torch.manual_seed(0)
    a = draw()
    torch.manual_seed(0)
    b = draw()
    assert torch.equal(a, b)
    torch.npu.manual_seed(1)
    c = draw()
    torch.npu.manual_seed(1)
    assert torch.equal(c, draw())
    assert not torch.equal(a, c)


def test_npu_stream_is_independent_of_cpu_draws():
    torch.manual_seed(0)
    a = draw()
    torch.manual_seed(0)
    torch.randn(1000)  # consume the CPU generator only
    b = draw()
    assert torch.equal(a, b)


def test_each_device_has_its_own_generator():
    torch.npu.manual_seed_all(3)
    a1 = draw("npu:1")
    b2 = draw("npu:2")
    torch.npu.manual_seed_all(3)
    torch.randn(100, device="npu:2")  # device 2 draws; device 1's stream is untouched
    assert torch.equal(draw("npu:1"), a1)
    assert torch.equal(a1, b2)  # same seed, same position, same numbers


def test_explicit_npu_generator():
    g = torch.Generator(device="npu")
    assert str(g.device) == "npu:0"
    assert str(torch.Generator(device="npu:3").device) == "npu:3"
    g.manual_seed(1)
    a = draw(generator=g)
    g.manual_seed(1)
    assert torch.equal(draw(generator=g), a)
    assert g.initial_seed() == 1


def test_generator_device_mismatch_errors():
    with pytest.raises(RuntimeError, match="Expected a 'npu' device type for generator but found 'cpu'"):
        torch.randn(3, device="npu", generator=torch.Generator())
    with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator but found 'npu'"):
        torch.randn(3, generator=torch.Generator(device="npu"))


def test_rng_state_round_trip():
    state = torch.npu.get_rng_state()
    a = torch.rand(3, device="npu").cpu()
    torch.npu.set_rng_state(state)
    assert torch.equal(torch.rand(3, device="npu").cpu(), a)
    states = torch.npu.get_rng_state_all()
    assert len(states) == torch.npu.device_count()
    first = [torch.rand(2, device=f"npu:{i}").cpu() for i in range(2)]
    torch.npu.set_rng_state_all(states)
    assert all(torch.equal(torch.rand(2, device=f"npu:{i}").cpu(), first[i]) for i in range(2))


def test_seed_and_initial_seed():
    torch.npu.manual_seed(1234)
    assert torch.npu.initial_seed() == 1234
    torch.npu.seed()
    assert torch.npu.initial_seed() != 1234
    torch.npu.seed_all()
    assert torch.npu.default_generators[0].initial_seed() == torch.npu.default_generators[1].initial_seed()


def test_fork_rng_restores_npu_state():
    torch.manual_seed(0)
    before = torch.npu.get_rng_state()
    with torch.random.fork_rng(devices=[0], device_type="npu"):
        torch.randn(10, device="npu")
    assert torch.equal(torch.npu.get_rng_state(), before)


@pytest.mark.parametrize(
    "make",
    [
        lambda d: torch.rand(50, device=d),
        lambda d: torch.randint(0, 100, (50,), device=d),
        lambda d: torch.randperm(50, device=d),
        lambda d: torch.nn.functional.dropout(torch.ones(200, device=d), 0.3),
        lambda d: torch.bernoulli(torch.full((50,), 0.5, device=d)),
        lambda d: torch.multinomial(torch.ones(10, device=d), 5),
        lambda d: torch.empty(50, device=d).normal_(2.0, 3.0),
        lambda d: torch.empty(50, device=d).uniform_(),
        lambda d: torch.randn_like(torch.ones(50, device=d)),
        lambda d: torch.nn.functional.scaled_dot_product_attention(
            *(torch.ones(1, 2, 4, 8, device=d),) * 3, dropout_p=0.5
        ),
    ],
)
def test_random_ops_are_reproducible_per_seed(make):
    torch.manual_seed(7)
    a = make("npu").cpu()
    torch.manual_seed(7)
    b = make("npu").cpu()
    assert torch.equal(a, b)


def test_checkpoint_with_dropout_matches_no_checkpoint():
    layer = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5)).npu()
    x = torch.randn(4, 8, device="npu", requires_grad=True)
    torch.manual_seed(0)
    layer(x).sum().backward()
    plain = x.grad.clone()
    x.grad = None
    torch.manual_seed(0)
    torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=False).sum().backward()
    assert torch.equal(x.grad.cpu(), plain.cpu())


def test_seeding_before_initialisation_is_queued():
    proc = run_python("""
        import torch, torch_npu
        torch.npu.manual_seed_all(11)
        a = torch.randn(3, device="npu").tolist()
        torch.npu.manual_seed_all(11)
        print(a == torch.randn(3, device="npu").tolist(), torch.npu.initial_seed())
    """)
    assert last_line(proc) == "True 11"


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool])
def test_normal_fills_integer_and_bool_tensors_as_the_card_does(dtype):
    # the CPU's normal_ refuses integer tensors; the card's fills them (float32 draws cast into the tensor)
    torch.manual_seed(7)
    got = torch.randn(64, dtype=dtype, device="npu")
    torch.manual_seed(7)
    floats = torch.randn(64, device="npu")
    assert got.dtype == dtype and torch.equal(got.cpu(), floats.cpu().to(dtype))
    with pytest.raises(NotImplementedError, match="not implemented for"):
        torch.randn(4, dtype=dtype)  # the CPU keeps its own rule


def test_normal_with_mean_std_and_generator_on_integer_tensors():
    g = torch.Generator(device="npu").manual_seed(3)
    got = torch.empty(32, dtype=torch.int64, device="npu").normal_(5.0, 2.0, generator=g)
    g.manual_seed(3)
    want = torch.empty(32, device="npu").normal_(5.0, 2.0, generator=g).to(torch.int64)
    assert torch.equal(got.cpu(), want.cpu())
    # floating and complex tensors take the CPU's kernel unchanged: the same numbers as the CPU for one seed
    for dtype in (torch.float32, torch.complex64):
        torch.manual_seed(1)
        npu = torch.randn(6, dtype=dtype, device="npu")
        torch.manual_seed(1)
        assert torch.equal(npu.cpu(), torch.randn(6, dtype=dtype))
