"""OpInfo operators that are not bit-identical between npu and cpu, one reason each.

tests/test_opinfo_parity.py fails when an operator listed here starts to pass (remove it) or
when one not listed fails, so this list is always the exact set of known differences.
"""

# The operator raises on npu, by design: (reason, what the error says).
UNSUPPORTED = {
    "sparse.sampled_addmm": ("sparse CSR inputs are not supported on npu", "not supported on npu"),
    "sparse.mm.reduce": ("sparse CSR inputs are not supported on npu", "not supported on npu"),
}

# The CPU kernel itself is not deterministic, so npu can only be compared within tolerance.
NONDETERMINISTIC_ON_CPU = {
    "linalg.lstsq": "driver='gelsy' reads its uninitialised pivot workspace: the CPU result depends on "
    "what the allocator's recycled memory held (CPU differs from itself after another "
    "allocation), so npu matches to 1e-6, not bit for bit",
    "linalg.lstsq.grad_oriented": "same gelsy workspace as linalg.lstsq",
}

# torch_npu's rules where the card, not the CPU, is followed on purpose: (reason, what the result shows).
_NO_DOUBLE = "a dtype-only conversion of an npu tensor to float64 gives float32 (the card has no float64 kernels)"
_CONTIGUOUS_ONLY = "torch_npu's contiguous() supports the contiguous format only; this backward asks for channels_last"
FOLLOWS_THE_CARD = {
    "double": (_NO_DOUBLE, "torch.float32 vs"),
    "to": (_NO_DOUBLE, "torch.float32 vs"),
    "float_power": (_NO_DOUBLE + "; float_power converts its inputs that way", "torch.float32 vs"),
    "nn.functional.max_unpool2d": (_CONTIGUOUS_ONLY, "NPU contiguous operator only supported contiguous"),
    "nn.functional.max_unpool2d.grad": (_CONTIGUOUS_ONLY, "NPU contiguous operator only supported contiguous"),
}
