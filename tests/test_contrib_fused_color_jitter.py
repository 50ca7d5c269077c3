"""torch_npu.contrib's FusedColorJitter: one 3 x 3 matrix and an offset applied to a PIL image or an H x W x C
array, factors drawn from Python's random in torch_npu's order, torch_npu's argument checks and errors."""

import math
import random

import numpy as np
import pytest
import torch
from error_cases import raises_exactly

from torch_npu.contrib.module import FusedColorJitter

PIL = pytest.importorskip("PIL.Image", reason="Pillow (a torchvision dependency) is not installed")


def _pixels(seed=0, shape=(5, 7, 3)):
    return np.random.default_rng(seed).integers(0, 256, size=shape).astype(np.uint8)


def _jitter(**kwargs):
    with pytest.warns(FutureWarning, match="FusedColorJitter is deprecated"):
        return FusedColorJitter(**kwargs)


def test_zero_saturation_gives_the_luma_in_every_channel():
    img = _pixels()
    out = _jitter(saturation=(0.0, 0.0))(img)
    luma = (img.astype(np.float32).reshape(-1, 3) @ np.array([0.299, 0.587, 0.114], np.float32)).reshape(5, 7)
    assert out.dtype == np.uint8
    for channel in range(3):
        assert np.array_equal(out[:, :, channel], np.clip(luma, 0, 255).astype(np.uint8))


def test_brightness_and_contrast_scale_and_offset():
    img = _pixels(1).astype(np.float32)
    out = _jitter(saturation=(0.0, 0.0), brightness=(2.0, 2.0), contrast=(0.5, 0.5))(img)
    luma = img.reshape(-1, 3) @ np.array([0.299, 0.587, 0.114], np.float32)
    want = np.clip(luma * 2.0 * 0.5 + (1 - 0.5) * 2.0 * 127.5, 0, 255).reshape(5, 7)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out[:, :, 1], want, rtol=1e-6)


def test_hue_rotates_the_chroma_plane_by_hue_times_255_degrees():
    img = _pixels(2).astype(np.float32)
    out = _jitter(hue=(0.25, 0.25))(img)
    angle = 0.25 * 255.0 * math.pi / 180.0
    # YIQ: luma is kept, the (I, Q) chroma vector turns by the angle (to the matrices' three-digit precision)
    yiq = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.322], [0.211, -0.523, 0.312]], np.float32)
    inside = (out.reshape(-1, 3) > 0).all(1) & (out.reshape(-1, 3) < 255).all(1)  # not clipped
    assert inside.sum() > 10
    before, after = (img.reshape(-1, 3) @ yiq.T)[inside], (out.reshape(-1, 3) @ yiq.T)[inside]
    np.testing.assert_allclose(after[:, 0], before[:, 0], atol=0.5)
    chroma_before, chroma_after = before[:, 1:], after[:, 1:]
    np.testing.assert_allclose(
        np.linalg.norm(chroma_after, axis=1), np.linalg.norm(chroma_before, axis=1), rtol=0.02, atol=1.0
    )
    strong = np.linalg.norm(chroma_before, axis=1) > 30  # the matrices' rounding turns weak colours unevenly
    cos_turn = (chroma_before * chroma_after).sum(1) / np.linalg.norm(chroma_before, axis=1) ** 2
    np.testing.assert_allclose(cos_turn[strong], math.cos(angle), atol=0.02)


def test_pil_images_come_back_as_rgb_images_and_alpha_is_dropped():
    rgba = np.concatenate([_pixels(3), np.full((5, 7, 1), 9, np.uint8)], axis=2)
    out = _jitter(saturation=(0.0, 0.0))(PIL.fromarray(rgba))
    assert isinstance(out, PIL.Image) and out.mode == "RGB" and out.size == (7, 5)
    gray = np.asarray(out)
    assert np.array_equal(gray[:, :, 0], gray[:, :, 2])


def test_factors_are_drawn_from_python_random_in_torch_npus_order():
    img = _pixels(4).astype(np.float32)
    jitter = _jitter(brightness=0.3, contrast=0.2, saturation=0.4, hue=0.1)
    random.seed(7)
    first = jitter(img)
    random.seed(7)
    assert np.array_equal(jitter(img), first)
    random.seed(7)
    hue, saturation = random.uniform(-0.1, 0.1), random.uniform(0.6, 1.4)
    contrast, brightness = random.uniform(0.8, 1.2), random.uniform(0.7, 1.3)
    angle = hue * 255.0 * math.pi / 180.0
    luma = np.array([0.299, 0.587, 0.114], np.float32)
    cos_part = np.array([[0.701, -0.299, -0.300], [-0.587, 0.413, -0.588], [-0.114, -0.114, 0.886]], np.float32)
    sin_part = np.array([[0.168, -0.328, 1.250], [0.330, 0.035, -1.050], [-0.497, 0.292, -0.203]], np.float32)
    matrix = luma[:, None] + saturation * (math.cos(angle) * cos_part + math.sin(angle) * sin_part)
    want = img.reshape(-1, 3) @ (matrix * brightness * contrast) + (1 - contrast) * brightness * 127.5
    np.testing.assert_allclose(first.reshape(-1, 3), np.clip(want, 0, 255), rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize(
    "call, kind, message",
    [
        (
            lambda: FusedColorJitter(brightness=-1),
            ValueError,
            "If brightness is a single number, it must be non negative.",
        ),
        (lambda: FusedColorJitter(hue=(-0.2, 0.7)), ValueError, "hue values should be between (-0.5, 0.5)"),
        (
            lambda: FusedColorJitter(contrast="strong"),
            TypeError,
            "contrast should be a single number or a list/tuple with length 2.",
        ),
        (
            lambda: FusedColorJitter(0.1)(torch.zeros(3, 4, 4)),
            TypeError,
            "FusedColorJitter takes a PIL image or an H x W x C numpy array, got Tensor",
        ),
        (
            lambda: FusedColorJitter(0.1)(np.zeros((4, 4, 2), np.uint8)),
            ValueError,
            "Unknow format using.. Currnet shape is (4, 4, 2)",
        ),
    ],
)
def test_bad_arguments_get_torch_npus_errors(call, kind, message):
    with pytest.warns(FutureWarning):
        raises_exactly(call, kind, message)
