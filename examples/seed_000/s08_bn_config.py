# context
import torch_npu

torch_npu.npu.config.bn_folding = True  # 开启BN折叠优化
torch_npu.npu.config.bn_impl_mode = "fast"  # 快速计算模式
