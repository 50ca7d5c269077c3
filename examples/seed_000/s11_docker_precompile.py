import torch_npu; torch_npu.npu.precompile(['conv', 'matmul'])
