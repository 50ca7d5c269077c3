"""The TorchScript fusion passes `torch_npu.jit.optimize` runs, one per file."""
