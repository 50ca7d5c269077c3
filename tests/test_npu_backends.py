"""torch.npu.backends: the card's FFT plan cache (size, max_size, clear) kept beside FFTs computed as on the
CPU, and the attention / linear-algebra switches with torch_npu's warnings."""

import warnings

import pytest
import torch

import torch_npu  # noqa: F401

cache = torch.npu.backends.fft_plan_cache


@pytest.fixture
def empty_cache():
    before = cache.max_size
    cache.clear()
    yield
    cache.max_size = before
    cache.clear()


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.fft.fft(x),
        lambda x: torch.fft.ifft(torch.fft.fft(x)),
        lambda x: torch.fft.irfft(torch.fft.rfft(x), n=x.shape[-1]),
        lambda x: torch.fft.fft2(x),
        lambda x: torch.fft.rfftn(x, dim=(0, 1), norm="ortho"),
    ],
)
def test_results_are_the_cpus(empty_cache, fn):
    x = torch.randn(6, 16)
    assert torch.equal(fn(x.npu()).cpu(), fn(x))
    assert cache.size >= 1


def test_one_plan_per_problem(empty_cache):
    x = torch.randn(4, 16, device="npu")
    torch.fft.fft(x)  # a real input: one r2c plan of length 16
    assert cache.size == 1
    torch.fft.fft(x)
    torch.fft.rfft(x)  # the same r2c problem
    assert cache.size == 1
    torch.fft.ifft(torch.fft.fft(x))  # + a backward c2c plan of length 16
    assert cache.size == 2
    torch.fft.fft(x.to(torch.complex64))  # a complex input: a forward c2c plan
    assert cache.size == 3
    torch.fft.fft(torch.randn(4, 8, device="npu"))  # another length
    assert cache.size == 4


def test_least_recently_used_plans_go_first(empty_cache):
    cache.max_size = 3
    signals = {n: torch.randn(n, device="npu") for n in (8, 9, 10, 11)}
    for n in (8, 9, 10):
        torch.fft.fft(signals[n])
    torch.fft.fft(signals[8])  # 8 used again: 9 is now the oldest
    torch.fft.fft(signals[11])  # evicts 9
    assert cache.size == 3
    cache.max_size = 2  # shrinking keeps the two most recent: 8 and 11
    assert cache.size == 2
    torch.fft.fft(signals[11])
    torch.fft.fft(signals[8])
    assert cache.size == 2
    torch.fft.fft(signals[10])
    assert cache.size == 2
    cache.clear()
    assert cache.size == 0


def test_defaults_and_refusals(empty_cache):
    assert cache.max_size == 10
    cache.max_size = 99
    assert cache.max_size == 99
    for bad in (0, 100):
        with pytest.raises(RuntimeError) as raised:
            cache.max_size = bad
        assert str(raised.value).splitlines()[0] == "invalid value of cache_size, expected 1 to 99"
    assert cache.max_size == 99
    with pytest.raises(RuntimeError) as raised:
        cache.size = 1
    assert str(raised.value) == ".size is a read-only property showing the number of plans currently in the cache."
    with pytest.raises(AttributeError, match="^Unknown attribute capacity$"):
        cache.capacity  # noqa: B018


def test_sdp_switches_set_the_global_flags_and_warn():
    before = torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.math_sdp_enabled()
    with pytest.warns(UserWarning, match="^Currently, the device operator does not support flash sdp and only sets"):
        torch.npu.backends.enable_flash_sdp(False)
    try:
        assert torch.backends.cuda.flash_sdp_enabled() is False
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert torch.npu.backends.flash_sdp_enabled() is False
            with torch.npu.backends.sdp_kernel(enable_flash=True, enable_math=False):
                assert torch.backends.cuda.flash_sdp_enabled() and not torch.backends.cuda.math_sdp_enabled()
            assert (torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.math_sdp_enabled()) == (False, True)
    finally:
        torch.backends.cuda.enable_flash_sdp(before[0])
        torch.backends.cuda.enable_math_sdp(before[1])


def test_linalg_library_is_not_implemented():
    with pytest.warns(UserWarning, match="^torch.npu.preferred_linalg_library isn't implemented!$"):
        assert torch.npu.backends.preferred_linalg_library("magma") == torch._C._LinalgBackend.Default
