"""Extra OpInfo sample generators of torch_npu's operator tests."""

import torch

__all__ = ["sample_inputs_median_custom", "sample_inputs_normal_tensor_second"]


def sample_inputs_median_custom(self, device, dtype, requires_grad, **kwargs):
    """median samples without ties, so the chosen index is unique on every backend."""
    from torch.testing._internal.opinfo.core import SampleInput

    def make(*shape):
        n = 1
        for s in shape:
            n *= s
        t = torch.randperm(n, device="cpu").reshape(shape).to(device=device, dtype=dtype)
        return t.requires_grad_(requires_grad) if dtype.is_floating_point else t

    yield SampleInput(make(5))
    yield SampleInput(make(4, 5), args=(1,))
    yield SampleInput(make(4, 5), args=(0, True))


def sample_inputs_normal_tensor_second(self, device, dtype, requires_grad, **kwargs):
    """torch.normal(mean: float, std: Tensor) samples."""
    from torch.testing._internal.opinfo.core import SampleInput

    for shape in ((), (3,), (2, 3)):
        std = torch.rand(shape, device="cpu").add_(0.1).to(device=device, dtype=dtype)
        yield SampleInput(0.5, args=(std.requires_grad_(requires_grad),))
