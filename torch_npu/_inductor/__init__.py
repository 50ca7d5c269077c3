"""torch.compile's inductor for the npu device.

torch_npu's own inductor backend lowers npu graphs with inductor's device-agnostic (non-CPU) lowering
and generates Triton-Ascend (or MLIR/DVM/AscendC) kernels for them. vnpu lowers the same graphs the same
way and generates inductor's CPU C++/OpenMP kernels instead: npu memory is host memory, so a kernel
compiled for the host computes directly on npu buffers. Everything around the kernels is the npu
device's: the buffers the generated code allocates come from the npu caching allocator (memory
statistics, OOM and the profiler see them), extern kernels (matmul, convolution, npu_* operators)
run as npu operators, and allocation and execution follow the npu device of the graph.

What is registered, and where (all through PyTorch's extension points):

* the inductor device backend: `torch.npu.Scheduling` / `PythonWrapperCodegen` / `CppWrapperCodegen`
  (PyTorch's lookup for a PrivateUse1 backend), see `codegen.py`;
* the device op overrides (`register_device_op_overrides`) and Dynamo's device interface
  (`register_interface_for_device`), applied when those modules are imported (torch_npu._patches);
* `torch._inductor.config.npu_backend` (torch_npu's option) and the NPU graph policy for
  `mode="reduce-overhead"` (`config.cudagraph_policy`), see `config.py` and `graph_policy.py`;
* the Dynamo backends `npugraphs` and `npugraph_ex` (entry points), see `backends.py`.
"""
