"""HiFloat8 (HiF8), Ascend's 8-bit tapered-precision float: encoding a tensor into HiF8 codes (uint8) and
decoding them.

A code is a sign bit and 7 bits whose prefix (the dot field) sets how many exponent bits follow:

    bits 6..3 of the code   exponent                      mantissa bits
    11xx                    ±8..±15  (4 bits, sign first)  1
    10xx                    ±4..±7   (3 bits)              2
    01xx                    ±2, ±3   (2 bits)              3
    001x                    ±1       (x: the sign)         3
    0001                    0                              3
    0000                    2^(m-23) for m = bits 2..0 = 1..7 (denormals, no mantissa)

The exponent's leading magnitude bit is implicit. 0x00 is zero (there is no negative zero), 0x80 is NaN,
0x6F / 0xEF are ±Inf; the largest finite magnitude is 2^15 (0x6E). Encoding rounds to the nearest code,
ties away from zero (TA, the card's HiF8 cast rounding); magnitudes from 1.25 * 2^15 up become ±Inf, below
2^-23 zero.
"""

import math

import torch

__all__ = []

NAN, POS_INF, NEG_INF = 0x80, 0x6F, 0xEF


def _magnitude(code):
    """The value of a 7-bit code (the overflow code 0x6F as the 1.5 * 2^15 it would be)."""
    dot = code >> 3
    if dot == 0:
        return 0.0 if code == 0 else 2.0 ** ((code & 7) - 23)
    if dot == 1:
        exponent, mantissa, mantissa_bits = 0, code & 7, 3
    elif dot < 4:
        exponent, mantissa, mantissa_bits = (-1 if code & 8 else 1), code & 7, 3
    elif dot < 8:
        field = (code >> 3) & 3
        exponent, mantissa, mantissa_bits = (-1 if field >> 1 else 1) * ((field & 1) + 2), code & 7, 3
    elif dot < 12:
        field = (code >> 2) & 7
        exponent, mantissa, mantissa_bits = (-1 if field >> 2 else 1) * ((field & 3) + 4), code & 3, 2
    else:
        field = (code >> 1) & 15
        exponent, mantissa, mantissa_bits = (-1 if field >> 3 else 1) * ((field & 7) + 8), code & 1, 1
    return math.ldexp(1.0 + mantissa / (1 << mantissa_bits), exponent)


def _tables():
    decode = []
    for code in range(256):
        if code == NAN:
            decode.append(math.nan)
        elif code & 0x7F == POS_INF:
            decode.append(-math.inf if code & 0x80 else math.inf)
        else:
            decode.append((-1.0 if code & 0x80 else 1.0) * _magnitude(code & 0x7F))
    ordered = sorted(range(128), key=_magnitude)
    grid = [_magnitude(code) for code in ordered]
    midpoints = [(low + high) / 2 for low, high in zip(grid, grid[1:])]
    return (
        torch.tensor(decode, dtype=torch.float32),
        torch.tensor(midpoints, dtype=torch.float64),
        torch.tensor(ordered, dtype=torch.uint8),
    )


_DECODE, _MIDPOINTS, _ORDERED = _tables()


def encode(tensor):
    """HiF8 codes (uint8, same shape and device) of a floating-point tensor."""
    if not tensor.is_floating_point():
        raise TypeError(f"HiFloat8 encodes floating-point tensors, got {tensor.dtype}")
    device = tensor.device
    x = tensor.detach().cpu().double()
    magnitude = x.abs().nan_to_num(posinf=math.inf)
    index = torch.bucketize(magnitude, _MIDPOINTS, right=True)  # a value on a midpoint goes up: ties away
    codes = _ORDERED[index]
    negative = (x < 0) & (codes != 0)
    codes = torch.where(negative, codes | 0x80, codes)
    codes = torch.where(torch.isnan(x), torch.tensor(NAN, dtype=torch.uint8), codes)
    return codes.to(device)


def decode(codes, dtype=torch.float32):
    """The values of HiF8 codes (a uint8 or int8 tensor) as `dtype`."""
    if codes.element_size() != 1:
        raise TypeError(f"HiFloat8 codes are 8-bit, got {codes.dtype}")
    index = codes.detach().cpu().view(torch.uint8).long()
    return _DECODE[index].to(dtype).to(codes.device)
