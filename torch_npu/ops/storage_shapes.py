"""Physical storage shapes of torch_npu's private formats.

Values and the logical shape never change; what changes is how the NPU lays the bytes out, and so
how much memory a tensor occupies (`torch_npu.get_storage_size`):

- base formats (ND, NCHW, NHWC, NCDHW, NDHWC, NC, NCL, HWCN): the logical shape;
- FRACTAL_NZ for ``[..., m, n]``: ``[..., ceil(n/C0), ceil(m/16), 16, C0]`` with C0 = 32 bytes /
  min(itemsize, 2) elements (16 for float16/bfloat16/float32, 32 for int8); FRACTAL_NZ_C0_<k> fixes C0 = k;
- NC1HWC0 for ``[N, C, H, W]``: ``[N, ceil(C/C0), H, W, C0]`` (C0 = 4 for NC1HWC0_C04);
- FRACTAL_Z for ``[N, C, H, W]``: ``[ceil(C/C0) * H * W, ceil(N/16), 16, C0]``;
- NDC1HWC0 for ``[N, C, D, H, W]``: ``[N, D, ceil(C/C0), H, W, C0]``; FRACTAL_Z_3D: ``[D * ceil(C/C0) * H
  * W, ceil(N/16), 16, C0]``.

4-D formats take lower-rank tensors as torch_npu does, padding ``[C]``, ``[N, C]``, ``[N, C, H]`` with
trailing ones to ``[N, C, H, W]`` (a 1-D ``[C]`` becomes ``[1, C, 1, 1]``).
"""

import math

from torch_npu.npu._format import Format

BASE_FORMATS = {Format.ND, Format.NCHW, Format.NHWC, Format.NCDHW, Format.NDHWC, Format.NC, Format.NCL, Format.HWCN}
NZ_FORMATS = {
    Format.FRACTAL_NZ: None,
    Format.FRACTAL_NZ_C0_16: 16,
    Format.FRACTAL_NZ_C0_32: 32,
    Format.FRACTAL_NZ_C0_2: 2,
    Format.FRACTAL_NZ_C0_4: 4,
    Format.FRACTAL_NZ_C0_8: 8,
}
FIVE_D_FORMATS = {Format.NCDHW, Format.NDHWC, Format.NDC1HWC0, Format.FRACTAL_Z_3D}


def cube_c0(itemsize):
    return 32 // min(itemsize, 2)


def _ceil(a, b):
    return -(-a // b)


def _as_nchw(shape):
    if len(shape) == 1:
        return [1, shape[0], 1, 1]
    return list(shape) + [1] * (4 - len(shape))


def default_format(rank):
    """torch_npu's format for a new tensor of this rank."""
    if rank == 4:
        return Format.NCHW
    if rank == 5:
        return Format.NCDHW
    return Format.ND


def storage_shape(shape, fmt, itemsize):
    """The physical shape `fmt` gives a tensor of logical `shape` and element size `itemsize`."""
    fmt = Format(fmt)
    shape = list(shape)
    c0 = cube_c0(itemsize)
    if fmt in BASE_FORMATS:
        return shape
    if fmt in NZ_FORMATS:
        c0 = NZ_FORMATS[fmt] or c0
        *batch, m, n = shape
        return batch + [_ceil(n, c0), _ceil(m, 16), 16, c0]
    if fmt in (Format.NC1HWC0, Format.NC1HWC0_C04):
        c0 = 4 if fmt == Format.NC1HWC0_C04 else c0
        n, c, h, w = _as_nchw(shape)
        return [n, _ceil(c, c0), h, w, c0]
    if fmt == Format.FRACTAL_Z:
        n, c, h, w = _as_nchw(shape)
        return [_ceil(c, c0) * h * w, _ceil(n, 16), 16, c0]
    if fmt == Format.NDC1HWC0:
        n, c, d, h, w = shape
        return [n, d, _ceil(c, c0), h, w, c0]
    if fmt == Format.FRACTAL_Z_3D:
        n, c, d, h, w = shape
        return [d * _ceil(c, c0) * h * w, _ceil(n, 16), 16, c0]
    raise ValueError(f"no storage layout for format {fmt}")


def storage_numel(shape, fmt, itemsize):
    return math.prod(storage_shape(shape, fmt, itemsize))
