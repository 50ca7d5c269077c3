"""The data-preprocessing operators torchvision_npu runs on the card's DVPP unit, computed on the CPU:

- decode_jpeg(self, image_shape, channels=3): self is uint8 [addr (8 bytes, little endian), length (8 bytes),
  the JPEG file, 0]; the image decodes to uint8 [channels, H, W] (channels 3: RGB, 1: grayscale). vnpu decodes
  with Pillow (libjpeg): the DVPP decoder may differ by rounding in the colour conversion.
- img_to_tensor(self): uint8 images -> float32 / 255 (torchvision's ToTensor without the layout change).
- image_normalize(self, mean, variance, dtype=0): (x - mean[c]) / variance[c] per channel of NCHW images
  (torchvision_npu passes the standard deviation as `variance`); dtype 0 gives float32, 1 float16.
- crop_and_resize(self, boxes, box_index, crop_size, extrapolation_value=0, method="bilinear"): TensorFlow's
  CropAndResize on NCHW images; boxes holds [y1, x1, y2, x2] per box (normalised, flattened), box_index the
  image of each box, crop_size [h, w]; samples outside the image take extrapolation_value; float32 output.
"""

import io

import torch

from torch_npu.ops._common import check
from torch_npu.ops.registration import npu_op

__all__ = []

_JPEG_HEADER = 16  # the address and length words in front of the file


@npu_op(
    "decode_jpeg(Tensor self, int[] image_shape, int channels=3, bool try_recover_truncated=False) -> Tensor",
    fake=lambda x, image_shape, channels=3, try_recover_truncated=False: x.new_empty(
        channels, image_shape[0], image_shape[1]
    ),
)
def decode_jpeg(x, image_shape, channels=3, try_recover_truncated=False):
    """uint8 [channels, H, W] decoded from torchvision_npu's addressed byte buffer."""
    op = "decode_jpeg"
    check(x.dtype == torch.uint8 and x.dim() == 1, op, f"self must be a 1-D uint8 tensor, got {x.dtype} {tuple(x.shape)}")  # fmt: skip
    check(channels in (1, 3), op, f"channels must be 1 or 3, got {channels}")
    check(x.numel() > _JPEG_HEADER, op, f"self holds {x.numel()} bytes, fewer than the 16-byte address and length header")  # fmt: skip
    raw = x.cpu().numpy().tobytes()
    start, length = int.from_bytes(raw[:8], "little"), int.from_bytes(raw[8:16], "little")
    check(start + length <= len(raw), op, f"the header names {length} bytes at {start}, beyond the {len(raw)} given")
    try:
        from PIL import Image, ImageFile
    except ImportError as error:  # pragma: no cover - Pillow ships with torchvision
        raise RuntimeError(f"{op}: vnpu decodes JPEG with Pillow, which is not installed ({error})") from error
    ImageFile.LOAD_TRUNCATED_IMAGES = bool(try_recover_truncated)
    try:
        image = Image.open(io.BytesIO(raw[start : start + length]))
        image = image.convert("RGB" if channels == 3 else "L")
    except OSError as error:
        raise RuntimeError(f"{op}: the buffer is not a decodable JPEG image ({error})") from error
    decoded = torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8)
    hwc = decoded.view(image.height, image.width, channels)
    check(
        [image.height, image.width] == list(image_shape[:2]),
        op,
        f"image_shape {list(image_shape)} does not match the image ({image.height}, {image.width})",
    )
    return hwc.permute(2, 0, 1).contiguous().to(x.device)


@npu_op("img_to_tensor(Tensor self) -> Tensor")
def img_to_tensor(x):
    """uint8 pixel values scaled to float32 in [0, 1]."""
    check(x.dtype == torch.uint8, "img_to_tensor", f"self must be uint8, got {x.dtype}")
    return x.to(torch.float32).div(255)


_NORMALIZE_DTYPES = {0: torch.float32, 1: torch.float16}


def _normalized(x, mean, variance, dtype, op):
    check(dtype in _NORMALIZE_DTYPES, op, f"dtype must be 0 (float32) or 1 (float16), got {dtype}")
    check(x.dim() == 4, op, f"self must be an NCHW image batch, got {tuple(x.shape)}")
    channels = x.shape[1]
    for name, values in (("mean", mean), ("variance", variance)):
        check(values is None or len(values) == channels, op, f"{name} needs {channels} values, got {values}")
    out = x.float()
    if mean is not None:
        out = out - torch.tensor(mean, dtype=torch.float32, device=x.device).view(1, channels, 1, 1)
    if variance is not None:
        out = out / torch.tensor(variance, dtype=torch.float32, device=x.device).view(1, channels, 1, 1)
    return out.to(_NORMALIZE_DTYPES[dtype])


@npu_op("image_normalize(Tensor self, float[]? mean, float[]? variance, int dtype=0) -> Tensor")
def image_normalize(x, mean, variance, dtype=0):
    """(x - mean) / variance per channel."""
    return _normalized(x, mean, variance, dtype, "image_normalize")


@npu_op("image_normalize_(Tensor(a!) self, float[]? mean, float[]? variance, int dtype=0) -> Tensor(a!)")
def image_normalize_(x, mean, variance, dtype=0):
    """image_normalize written back into self."""
    return x.copy_(_normalized(x, mean, variance, dtype, "image_normalize_"))


def _sample_positions(starts, ends, size, crop):
    """TensorFlow's sampling grid: [boxes, crop] positions in pixels along one axis."""
    if crop > 1:
        steps = torch.arange(crop, dtype=torch.float32, device=starts.device)
        return starts[:, None] * (size - 1) + steps * ((ends - starts) * (size - 1) / (crop - 1))[:, None]
    return (0.5 * (starts + ends) * (size - 1))[:, None]


def _crop_fake(x, boxes, box_index, crop_size, extrapolation_value=0.0, method="bilinear"):
    return x.new_empty(len(box_index), x.shape[1], crop_size[0], crop_size[1], dtype=torch.float32)


@npu_op(
    "crop_and_resize(Tensor self, float[]? boxes, int[] box_index, int[] crop_size, float extrapolation_value=0, "
    'str method="bilinear") -> Tensor',
    fake=_crop_fake,
)
def crop_and_resize(x, boxes, box_index, crop_size, extrapolation_value=0.0, method="bilinear"):
    """[len(box_index), C, crop_h, crop_w] float32 crops, bilinear or nearest."""
    op = "crop_and_resize"
    check(method in ("bilinear", "nearest"), op, f"method must be 'bilinear' or 'nearest', got {method!r}")
    check(x.dim() == 4, op, f"self must be an NCHW image batch, got {tuple(x.shape)}")
    check(len(crop_size) == 2 and min(crop_size) > 0, op, f"crop_size must be [height, width] > 0, got {crop_size}")
    n = len(box_index)
    coords = [0.0, 0.0, 1.0, 1.0] * n if boxes is None else list(boxes)
    check(len(coords) == 4 * n, op, f"boxes needs 4 values per box_index entry ({4 * n}), got {len(coords)}")
    check(all(0 <= i < x.shape[0] for i in box_index), op, f"box_index {list(box_index)} out of range [0, {x.shape[0]})")  # fmt: skip
    _, _, height, width = x.shape
    box = torch.tensor(coords, dtype=torch.float32, device=x.device).view(n, 4)
    ys = _sample_positions(box[:, 0], box[:, 2], height, crop_size[0])  # [n, ch]
    xs = _sample_positions(box[:, 1], box[:, 3], width, crop_size[1])  # [n, cw]
    inside = ((ys >= 0) & (ys <= height - 1))[:, :, None] & ((xs >= 0) & (xs <= width - 1))[:, None, :]
    images = x.float()[torch.tensor(list(box_index), dtype=torch.long, device=x.device)]  # [n, C, H, W]
    rows = torch.arange(n, device=x.device)[:, None, None]

    def at(y, xx):  # [n, C, ch, cw] pixels at integer rows y [n, ch] and columns xx [n, cw]
        y = y.clamp(0, height - 1).long()[:, :, None]
        xx = xx.clamp(0, width - 1).long()[:, None, :]
        return images[rows, :, y, xx].permute(0, 3, 1, 2)

    if method == "nearest":
        out = at(torch.floor(ys + 0.5), torch.floor(xs + 0.5))  # roundf: halves away from zero
    else:
        top, left = torch.floor(ys), torch.floor(xs)
        dy, dx = (ys - top)[:, None, :, None], (xs - left)[:, None, None, :]
        upper = at(top, left) + (at(top, torch.ceil(xs)) - at(top, left)) * dx
        lower = at(torch.ceil(ys), left) + (at(torch.ceil(ys), torch.ceil(xs)) - at(torch.ceil(ys), left)) * dx
        out = upper + (lower - upper) * dy
    return torch.where(inside[:, None], out, torch.full_like(out, float(extrapolation_value)))
