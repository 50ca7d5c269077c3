# context
import torch_npu

# 在程序初始化时配置
torch_npu.npu.config.enable_auto_memory_optimize = True
torch_npu.npu.config.max_workspace_size = 1024 * 1024 * 1024  # 1GB
