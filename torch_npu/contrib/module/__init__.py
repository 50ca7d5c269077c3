"""torch_npu.contrib.module: layers from torch_npu's contrib package, as plain PyTorch modules."""

from torch_npu.contrib.module._ensemble_dropout import NpuPreGenDropout  # noqa: F401  (importable, as in torch_npu)
from torch_npu.contrib.module.activations import Mish, SiLU, Swish
from torch_npu.contrib.module.batchnorm_with_int32_count import (
    FastBatchNorm1d,
    FastBatchNorm2d,
    FastBatchNorm3d,
    FastSyncBatchNorm,
)
from torch_npu.contrib.module.bidirectional_lstm import BiLSTM
from torch_npu.contrib.module.channel_shuffle import ChannelShuffle
from torch_npu.contrib.module.crossentropy import LabelSmoothingCrossEntropy
from torch_npu.contrib.module.deform_conv import DCNv2, ModulatedDeformConv
from torch_npu.contrib.module.drop_path import NpuDropPath
from torch_npu.contrib.module.ensemble_dropout import NpuCachedDropout, NpuFairseqDropout
from torch_npu.contrib.module.focus import Focus
from torch_npu.contrib.module.fused_color_jitter import FusedColorJitter
from torch_npu.contrib.module.linear_a8w8_quant import LinearA8W8Quant
from torch_npu.contrib.module.linear_quant import LinearQuant
from torch_npu.contrib.module.linear_weight_quant import LinearWeightQuant
from torch_npu.contrib.module.multihead_attention import MultiheadAttention
from torch_npu.contrib.module.npu_modules import DropoutWithByteMask
from torch_npu.contrib.module.prefetcher import Prefetcher
from torch_npu.contrib.module.ps_roi_pooling import PSROIPool
from torch_npu.contrib.module.quant_conv2d import QuantConv2d
from torch_npu.contrib.module.roi_align import ROIAlign

__all__ = [
    "Mish",
    "SiLU",
    "Swish",
    "BiLSTM",
    "ChannelShuffle",
    "LabelSmoothingCrossEntropy",
    "ModulatedDeformConv",
    "DCNv2",
    "FastBatchNorm1d",
    "FastBatchNorm2d",
    "FastBatchNorm3d",
    "FastSyncBatchNorm",
    "NpuDropPath",
    "NpuCachedDropout",
    "NpuFairseqDropout",
    "Focus",
    "FusedColorJitter",
    "LinearA8W8Quant",
    "LinearQuant",
    "LinearWeightQuant",
    "MultiheadAttention",
    "DropoutWithByteMask",
    "Prefetcher",
    "PSROIPool",
    "QuantConv2d",
    "ROIAlign",
]
