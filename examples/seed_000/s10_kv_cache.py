# context
import torch_npu

torch_npu.npu.config.enable_kv_cache = True
torch_npu.npu.config.kv_cache_size = 512
