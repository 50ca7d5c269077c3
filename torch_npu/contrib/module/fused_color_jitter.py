"""FusedColorJitter: brightness, contrast, saturation and hue jitter of an image in one matrix product.

As torch_npu's transform it works on the host, on a PIL image or an H x W x C numpy array (C = 3; an alpha
channel is dropped, a gray channel repeated), values in [0, 255]: hue and saturation are one 3 x 3 matrix
(rotation and scaling of the chroma plane of YIQ), brightness and contrast scale it, and contrast's offset
is (1 - contrast) * brightness * 127.5. Factors come from Python's `random` in the order hue, saturation,
contrast, brightness — hue from [-h, h] (the angle is hue * 255 degrees), the others from
[max(0, 1 - v), 1 + v] — or from the given (min, max) ranges. A PIL image comes back as an RGB image, an
array in its own dtype, clipped to [0, 255].

torch_npu's class hands its four arguments to its transform in reverse order (its `brightness` jitters the
hue); vnpu applies each argument as documented.
"""

import math
import numbers
import random
import warnings

import numpy as np
from torch import nn

from torch_npu.utils._error_code import ErrCode, ops_error

__all__ = ["FusedColorJitter"]

_HALF_RANGE = 127.5
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)
# How a unit of cos(angle) and of sin(angle) moves each output channel, per input channel (rows: R, G, B in).
_CHROMA_COS = np.array([[0.701, -0.299, -0.300], [-0.587, 0.413, -0.588], [-0.114, -0.114, 0.886]], np.float32)
_CHROMA_SIN = np.array([[0.168, -0.328, 1.250], [0.330, 0.035, -1.050], [-0.497, 0.292, -0.203]], np.float32)


def _jitter_range(value, name, center=1.0, bound=(0.0, float("inf")), clip_first_on_zero=True):
    if isinstance(value, numbers.Number):
        if value < 0:
            raise ValueError(f"If {name} is a single number, it must be non negative." + ops_error(ErrCode.VALUE))
        low, high = center - float(value), center + float(value)
        if clip_first_on_zero:
            low = max(low, 0.0)
    elif isinstance(value, (tuple, list)) and len(value) == 2:
        if not bound[0] <= value[0] <= value[1] <= bound[1]:
            raise ValueError(f"{name} values should be between {bound}" + ops_error(ErrCode.VALUE))
        low, high = float(value[0]), float(value[1])
    else:
        raise TypeError(f"{name} should be a single number or a list/tuple with length 2." + ops_error(ErrCode.TYPE))
    return None if low == high == center else (low, high)


def _draw(interval, center):
    low, high = interval if interval is not None else (center, center)
    return random.uniform(low, high)


class FusedColorJitter(nn.Module):
    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        super().__init__()
        warnings.warn(
            "torch_npu.contrib.module.FusedColorJitter is deprecated. "
            "Please use torchvision.transforms.ColorJitter for replacement.",
            FutureWarning,
        )
        self.brightness = _jitter_range(brightness, "brightness")
        self.contrast = _jitter_range(contrast, "contrast")
        self.saturation = _jitter_range(saturation, "saturation")
        self.hue = _jitter_range(hue, "hue", center=0.0, bound=(-0.5, 0.5), clip_first_on_zero=False)

    def _transform(self):
        hue = _draw(self.hue, 0.0)
        saturation = _draw(self.saturation, 1.0)
        contrast = _draw(self.contrast, 1.0)
        brightness = _draw(self.brightness, 1.0)
        angle = hue * 255.0 * math.pi / 180.0
        matrix = (
            np.repeat(_LUMA[:, None], 3, axis=1)
            + saturation * math.cos(angle) * _CHROMA_COS
            + saturation * math.sin(angle) * _CHROMA_SIN
        )
        return matrix * brightness * contrast, (1.0 - contrast) * brightness * _HALF_RANGE

    def forward(self, img):
        from PIL import Image

        is_image = isinstance(img, Image.Image)
        if not is_image and not isinstance(img, np.ndarray):
            raise TypeError(
                f"FusedColorJitter takes a PIL image or an H x W x C numpy array, got {type(img).__name__}"
                + ops_error(ErrCode.TYPE)
            )
        matrix, offset = self._transform()
        pixels = np.asarray(img, dtype=np.float32)
        dtype = np.uint8 if is_image else img.dtype
        if pixels.ndim != 3 or pixels.shape[2] not in (1, 3, 4):
            raise ValueError(f"Unknow format using.. Currnet shape is {pixels.shape}" + ops_error(ErrCode.VALUE))
        if pixels.shape[2] == 4:
            pixels = pixels[:, :, :3]
        elif pixels.shape[2] == 1:
            pixels = pixels.repeat(3, axis=-1)
        height, width, _ = pixels.shape
        out = (pixels.reshape(-1, 3) @ matrix + offset).reshape(height, width, 3)
        out = out.clip(0.0, 255.0).astype(dtype)
        return Image.fromarray(out) if is_image else out

    def __repr__(self):
        return (
            f"{type(self).__name__}(brightness={self.brightness}, contrast={self.contrast}, "
            f"saturation={self.saturation}, hue={self.hue})"
        )
