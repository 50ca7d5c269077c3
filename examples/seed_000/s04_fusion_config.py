import torch_npu
torch_npu.npu.set_compile_mode(jit_compile=True)  # 开启JIT编译
torch_npu.npu.config.allow_internal_format = True  # 允许内部格式优化
print(torch_npu.npu.is_jit_compile_false(), torch_npu.npu.config.allow_internal_format)
