"""The DVPP preprocessing operators torchvision_npu calls: decode_jpeg against Pillow's decode of the same file,
img_to_tensor / image_normalize against torchvision's transforms, crop_and_resize against TensorFlow's
CropAndResize written out pixel by pixel."""

import io
import math
import struct

import numpy as np
import pytest
import torch

import torch_npu
from tests.error_cases import raises_operator_error
from tests.op_check import check_op

PIL = pytest.importorskip("PIL.Image", reason="Pillow (a torchvision dependency) writes the test JPEG")


def _jpeg_bytes(height, width, seed=0):
    pixels = np.random.default_rng(seed).integers(0, 255, (height, width, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    PIL.fromarray(pixels).save(buffer, format="JPEG")
    return buffer.getvalue()


def _addressed(data):
    """torchvision_npu's buffer: address 16 and length as little-endian words, the file, a trailing 0."""
    raw = struct.pack("<QQ", 16, len(data)) + data + b"\0"
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8)


@pytest.mark.parametrize("channels", [3, 1])
def test_decode_jpeg_equals_pillow(channels):
    data = _jpeg_bytes(24, 40)
    out = torch_npu.decode_jpeg(_addressed(data).npu(), [24, 40, 3], channels=channels)
    mode = "RGB" if channels == 3 else "L"
    want = torch.from_numpy(np.array(PIL.open(io.BytesIO(data)).convert(mode))).reshape(24, 40, channels)
    assert out.device.type == "npu" and out.dtype == torch.uint8
    assert torch.equal(out.cpu(), want.permute(2, 0, 1))


def test_decode_jpeg_errors():
    data = _addressed(_jpeg_bytes(8, 8))
    raises_operator_error(
        lambda: torch_npu.decode_jpeg(data.npu(), [9, 8, 3]),
        "decode_jpeg: image_shape [9, 8, 3] does not match the image (8, 8)",
    )
    raises_operator_error(
        lambda: torch_npu.decode_jpeg(data.npu(), [8, 8, 3], channels=4), "decode_jpeg: channels must be 1 or 3, got 4"
    )
    garbage = _addressed(b"not a jpeg at all")
    with pytest.raises(RuntimeError, match="decode_jpeg: the buffer is not a decodable JPEG image"):
        torch_npu.decode_jpeg(garbage.npu(), [8, 8, 3])


def test_img_to_tensor_and_normalize_match_torchvision():
    transforms = pytest.importorskip("torchvision.transforms", reason="torchvision is a test dependency")
    image = torch.randint(0, 256, (2, 3, 6, 5), dtype=torch.uint8)
    check_op(torch_npu.img_to_tensor, (image,), lambda x: x.to(torch.float32).div(255))
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    scaled = image.float() / 255
    want = transforms.Normalize(mean, std)(scaled)
    check_op(lambda x: torch_npu.image_normalize(x, mean, std, 0), (scaled,), lambda x: want, atol=1e-6, rtol=1e-6)
    half = torch_npu.image_normalize(scaled.npu(), mean=mean, variance=std, dtype=1)
    assert half.dtype == torch.float16 and torch.equal(half.cpu(), want.half())
    inplace = scaled.npu()
    assert torch_npu.image_normalize_(inplace, mean, std, 0) is inplace
    torch.testing.assert_close(inplace.cpu(), want, atol=1e-6, rtol=1e-6)
    raises_operator_error(
        lambda: torch_npu.image_normalize(scaled.npu(), [0.5], std, 0),
        "image_normalize: mean needs 3 values, got [0.5]",
    )


def tf_crop_and_resize(image, boxes, box_index, crop_size, extrapolation, method):
    """TensorFlow's CropAndResize kernel, one output pixel at a time."""
    _, channels, height, width = image.shape
    crop_h, crop_w = crop_size
    out = torch.empty(len(box_index), channels, crop_h, crop_w)
    for b, index in enumerate(box_index):
        y1, x1, y2, x2 = boxes[4 * b : 4 * b + 4]
        for i in range(crop_h):
            y = y1 * (height - 1) + i * (y2 - y1) * (height - 1) / (crop_h - 1) if crop_h > 1 else 0.5 * (y1 + y2) * (height - 1)  # fmt: skip
            for j in range(crop_w):
                x = x1 * (width - 1) + j * (x2 - x1) * (width - 1) / (crop_w - 1) if crop_w > 1 else 0.5 * (x1 + x2) * (width - 1)  # fmt: skip
                if not (0 <= y <= height - 1 and 0 <= x <= width - 1):
                    out[b, :, i, j] = extrapolation
                    continue
                pixel = image[index].double()
                if method == "nearest":
                    out[b, :, i, j] = pixel[:, math.floor(y + 0.5), math.floor(x + 0.5)].float()
                    continue
                top, bottom, left, right = math.floor(y), math.ceil(y), math.floor(x), math.ceil(x)
                dy, dx = y - top, x - left
                upper = pixel[:, top, left] + (pixel[:, top, right] - pixel[:, top, left]) * dx
                lower = pixel[:, bottom, left] + (pixel[:, bottom, right] - pixel[:, bottom, left]) * dx
                out[b, :, i, j] = (upper + (lower - upper) * dy).float()
    return out


@pytest.mark.parametrize("method", ["bilinear", "nearest"])
def test_crop_and_resize_matches_tensorflow(method):
    image = torch.randint(0, 256, (2, 3, 9, 12), dtype=torch.uint8)
    boxes = [0.3, 0.0, 1.0, 1.0, 0.2, 0.6, 1.3, 0.9, 0.5, 0.5, 0.5, 0.5]
    box_index, crop = [0, 1, 1], [5, 4]
    args = (boxes, box_index, crop, -1.0, method)
    want = tf_crop_and_resize(image, boxes, box_index, crop, -1.0, method)
    check_op(torch_npu.crop_and_resize, (image, *args), lambda *a: want, atol=1e-4, rtol=1e-5)


def test_crop_and_resize_whole_image_is_identity_and_errors():
    image = torch.randint(0, 256, (1, 3, 6, 7), dtype=torch.uint8)
    out = torch_npu.crop_and_resize(image.npu(), boxes=[0, 0, 1, 1], box_index=[0], crop_size=[6, 7])
    assert torch.equal(out.cpu(), image.float())
    raises_operator_error(
        lambda: torch_npu.crop_and_resize(image.npu(), [0, 0, 1, 1], [0], [6, 7], method="bicubic"),
        "crop_and_resize: method must be 'bilinear' or 'nearest', got 'bicubic'",
    )
    raises_operator_error(
        lambda: torch_npu.crop_and_resize(image.npu(), [0, 0, 1, 1], [1], [6, 7]),
        "crop_and_resize: box_index [1] out of range [0, 1)",
    )
