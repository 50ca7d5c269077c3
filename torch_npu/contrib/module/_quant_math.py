"""Reference arithmetic of the NPU's quantised matmul and convolution (int8 x int8 -> int32
accumulate, + int32 bias, x per-channel scale [x per-token scale] + offset, then the output dtype;
int8 output rounds half to even and saturates)."""
import torch


def requantize(value, output_dtype):
    if output_dtype in (None, torch.int8):
        return torch.round(value).clamp(-128, 127).to(torch.int8)
    return value.to(output_dtype)


def quant_matmul(x, weight_t, scale, offset=None, pertoken_scale=None, bias=None, output_dtype=None):
    """x [.., m, k] int8, weight_t [k, n] int8 -> dequantised/requantised [.., m, n]."""
    acc = torch.matmul(x.to(torch.int64), weight_t.to(torch.int64))
    if bias is not None:
        acc = acc + bias.to(torch.int64)
    value = acc.to(torch.float32) * scale.to(torch.float32)
    if pertoken_scale is not None:
        value = value * pertoken_scale.to(torch.float32).unsqueeze(-1)
    if offset is not None:
        value = value + offset.to(torch.float32)
    return requantize(value, output_dtype)
