"""torch_npu.multiprocessing: npu tensors and events passed between processes (torch.multiprocessing
queues, pipes, spawn arguments) share their memory, as on the card."""
