"""FusedColorJitter: brightness, contrast, saturation and hue jitter of image tensors in one module.

Input: float image tensors [..., 3, H, W] in [0, 1]. Factors are drawn uniformly from [max(0, 1-v),
1+v] (hue from [-v, v]); the four adjustments run in a random order, as torchvision's ColorJitter.
"""

import torch
from torch import nn

__all__ = ["FusedColorJitter"]


def _grayscale(img):
    r, g, b = img.unbind(dim=-3)
    return (0.2989 * r + 0.587 * g + 0.114 * b).unsqueeze(-3)


def _blend(img1, img2, ratio):
    return (ratio * img1 + (1.0 - ratio) * img2).clamp(0, 1)


def _rgb_to_hsv(img):
    r, g, b = img.unbind(dim=-3)
    maxc, _ = img.max(dim=-3)
    minc, _ = img.min(dim=-3)
    eqc = maxc == minc
    cr = maxc - minc
    ones = torch.ones_like(maxc)
    s = cr / torch.where(eqc, ones, maxc)
    cr_divisor = torch.where(eqc, ones, cr)
    rc, gc, bc = (maxc - r) / cr_divisor, (maxc - g) / cr_divisor, (maxc - b) / cr_divisor
    hr = (maxc == r) * (bc - gc)
    hg = ((maxc == g) & (maxc != r)) * (2.0 + rc - bc)
    hb = ((maxc != g) & (maxc != r)) * (4.0 + gc - rc)
    h = torch.fmod((hr + hg + hb) / 6.0 + 1.0, 1.0)
    return torch.stack((h, s, maxc), dim=-3)


def _hsv_to_rgb(img):
    h, s, v = img.unbind(dim=-3)
    i = torch.floor(h * 6.0)
    f = h * 6.0 - i
    i = i.to(torch.int32) % 6
    p = (v * (1.0 - s)).clamp(0, 1)
    q = (v * (1.0 - s * f)).clamp(0, 1)
    t = (v * (1.0 - s * (1.0 - f))).clamp(0, 1)
    mask = i.unsqueeze(-3) == torch.arange(6, device=i.device).view(-1, 1, 1)
    a1 = torch.stack((v, q, p, p, t, v), dim=-3)
    a2 = torch.stack((t, v, v, q, p, p), dim=-3)
    a3 = torch.stack((p, p, t, v, v, q), dim=-3)
    a4 = torch.stack((a1, a2, a3), dim=-4)
    return torch.einsum("...ijk, ...xijk -> ...xjk", mask.to(img.dtype), a4)


class FusedColorJitter(nn.Module):
    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        super().__init__()
        if not 0 <= hue <= 0.5:
            raise ValueError(f"hue must be in [0, 0.5], but got {hue}")
        self.brightness, self.contrast, self.saturation, self.hue = brightness, contrast, saturation, hue

    @staticmethod
    def _factor(v):
        return float(torch.empty(1).uniform_(max(0.0, 1 - v), 1 + v))

    def forward(self, img):
        for fn in torch.randperm(4).tolist():
            if fn == 0 and self.brightness:
                img = _blend(img, torch.zeros_like(img), self._factor(self.brightness))
            elif fn == 1 and self.contrast:
                mean = _grayscale(img).mean(dim=(-3, -2, -1), keepdim=True)
                img = _blend(img, mean, self._factor(self.contrast))
            elif fn == 2 and self.saturation:
                img = _blend(img, _grayscale(img), self._factor(self.saturation))
            elif fn == 3 and self.hue:
                shift = float(torch.empty(1).uniform_(-self.hue, self.hue))
                hsv = _rgb_to_hsv(img)
                hsv = torch.stack(((hsv[..., 0, :, :] + shift) % 1.0, hsv[..., 1, :, :], hsv[..., 2, :, :]), dim=-3)
                img = _hsv_to_rgb(hsv)
        return img
