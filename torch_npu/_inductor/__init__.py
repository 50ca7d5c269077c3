"""torch.compile for the npu device.

torch_npu's own inductor backend lowers npu graphs for the card and generates Triton-Ascend (or
MLIR/DVM/AscendC) kernels. vnpu's chip is the host CPU and npu memory is host memory, so inductor
compiles an npu graph as the CPU graph it computes and the compiled code runs on the npu tensors
through zero-copy CPU aliases, its buffers taken from the npu caching allocator.

* `host_compile.py` — the per-graph compiler behind inductor's entry point (compile_fx);
* `fallback_list.py` — NPU_INDUCTOR_FALLBACK_LIST, operators left to their ATen kernels;
* `config.py` — `torch._inductor.config.npu_backend` (torch_npu's option, validated);
* `device_interface.py` — Dynamo's device interface for npu (`register_interface_for_device`);
* `reduce_overhead.py` — mode="reduce-overhead": inductor's code under the NPU graph trees;
* `decomposition_choice.py` — decompositions chosen by device answered for npu calls as for CPU calls, used by
  `random_decompositions.py` (bernoulli) and `matmul_decompositions.py` (small matmuls);
* `graph_runner.py` — NPU graph capture and replay for the graph backends;
* `backends.py` — the Dynamo backends `npugraphs` and `npugraph_ex` (entry points);
* `npu_static_kernel.py` — torch_npu's static-kernel compiler: operator information of a run handed to CANN's
  `op_compiler` when it is installed.

Everything that changes inductor or Dynamo is declared in torch_npu._patches.
"""
