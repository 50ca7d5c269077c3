"""NPU graph trees (torch_npu.npu._graph_tree): PyTorch's CUDA graph trees on the npu device.

torch_npu ports torch/_inductor/cudagraph_trees.py to NPU graphs under torch_npu's names: the tree manager
that warms a compiled function up, records it into an NPU graph and replays it, one tree of graphs per
device sharing one memory pool, with the pool checkpointed after each recording so another branch can be
recorded while the outputs of a replayed path are alive (`npugraphify`, `npugraphify_impl`,
`NPUGraphTreeManager`, `NPUGraphNode`, `NPUWarmupNode`, `TreeManagerContainer`, `get_container`,
`reset_npugraph_trees`, `mark_step_begin`, ...).

vnpu builds this module from the PyTorch it runs on rather than from a copy: it reads
torch._inductor.cudagraph_trees' source, rewrites its syntax tree and executes it here. The rewrite
(`_NpuGraphTree`) is what torch_npu's port changes:

* names: every identifier the module defines that says cuda / CUDA says npu / NPU (CUDAGraphNode ->
  NPUGraphNode, cuda_graphs_pool -> npu_graphs_pool, cudagraphify -> npugraphify, ...); what it imports and
  inductor's config options keep their names; the nodes take their graph id as `graph_id`;
* the device: torch.cuda -> torch.npu (CUDAGraph -> NPUGraph), `tensor.is_cuda` -> `tensor.is_npu`, and
  the runtime functions torch._C has for CUDA -> torch_npu._C's (pool checkpoints, raw delete, storage
  deleters, tensors rebuilt from metadata) or torch_npu.npu.graphs' (allocating a thread into a pool);
* `assert` statements raise RuntimeError, as torch_npu's port does;
* a graph node does not replay its graph right after recording it, and its recording keeps the random
  number generators' advance. A CUDA capture only records, so CUDA graph trees restore the generators
  after it and replay once to compute the recording's outputs; an NPU graph capture on vnpu runs the
  operators as it records them, so that replay would run them a second time on inputs the first run may
  have consumed (a backward reuses the saved tensors donated to it in place), and restoring the
  generators would make the next step draw the recording's random numbers again.

`torch.compile(mode="reduce-overhead")` on npu graphs records and replays through these trees
(torch_npu._inductor.reduce_overhead), as it does with torch_npu.
"""

import ast
import importlib.util
import re

# the rewritten code reaches torch, torch_npu._C and torch_npu.npu.graphs through these names
import torch  # noqa: F401

import torch_npu  # noqa: F401

# torch._C's CUDA runtime functions -> (module path, name) of their npu counterpart
_RUNTIME = {
    "_cuda_beginAllocateCurrentThreadToPool": ("torch_npu.npu.graphs", "_begin_allocate_to_pool"),
    "_cuda_endAllocateToPool": ("torch_npu.npu.graphs", "_end_allocate_to_pool"),
    "_cuda_releasePool": ("torch_npu.npu.graphs", "_release_pool"),
    "_cuda_getCheckpointState": ("torch_npu._C", "_npu_getCheckpointState"),
    "_cuda_setCheckpointPoolState": ("torch_npu._C", "_npu_setCheckpointPoolState"),
    "_cuda_checkPoolLiveAllocations": ("torch_npu._C", "_npu_checkPoolLiveAllocations"),
    "_cuda_cudaCachingAllocator_raw_delete": ("torch_npu._C", "_npu_npuCachingAllocator_raw_delete"),
    "_cuda_isHistoryEnabled": ("torch_npu._C", "_npu_isHistoryEnabled"),
    "_construct_CUDA_Tensor_From_Storage_And_Metadata": (
        "torch_npu._C",
        "_construct_NPU_Tensor_From_Storage_And_Metadata",
    ),
    "_add_cached_tensor": ("torch_npu._C", "_add_cached_tensor"),
    "_has_Standard_Deleter": ("torch_npu._C", "_has_Standard_Deleter"),
    "_free_And_Remove_DeleterFn": ("torch_npu._C", "_free_And_Remove_DeleterFn"),
    "_set_storage_access_error_msg": ("torch_npu._C", "_set_storage_access_error_msg"),
    "_set_storage_data_ptr_access_error_msg": ("torch_npu._C", "_set_storage_data_ptr_access_error_msg"),
    "_tensors_data_ptrs_at_indices_equal": ("torch_npu._C", "_tensors_data_ptrs_at_indices_equal"),
    # an npu has no cuBLAS workspaces and no cuDNN benchmark cache: nothing to clear, read or set
    "_cuda_clearCublasWorkspaces": (__name__, "_no_cuda_library_state"),
    "_cuda_get_conv_benchmark_empty_cache": (__name__, "_no_cuda_library_state"),
    "_cudnn_set_conv_benchmark_empty_cache": (__name__, "_no_cuda_library_state"),
}
_SOURCE_MODULE = "torch._inductor.cudagraph_trees"


def _no_cuda_library_state(*args):
    return None


def _npu_word(name):
    return re.sub("CUDA", "NPU", re.sub("cuda", "npu", name))


def _npu_message(text):
    return re.sub("cuda graph", "npu graph", re.sub("CUDA Graph", "NPU graph", _npu_word(text)))


def _dotted(path):
    """The expression `a.b.c` for the dotted path "a.b.c"."""
    first, *rest = path.split(".")
    node = ast.Name(first, ast.Load())
    for part in rest:
        node = ast.Attribute(node, part, ast.Load())
    return node


def _chain(node):
    """ "torch.cuda.graph" for the expression torch.cuda.graph; None if it is not a dotted name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


class _NpuGraphTree(ast.NodeTransformer):
    """Rewrites torch._inductor.cudagraph_trees into torch_npu.npu._graph_tree (see the module doc)."""

    def __init__(self, source, imported):
        self.lines = [line.encode() for line in source.splitlines(keepends=True)]  # offsets are in UTF-8 bytes
        self.imported = imported  # names the module imports: they keep their names
        self.classes = []  # the classes around the code being visited
        self.node_init = False  # visiting the __init__ of a graph node (its `id` parameter is `graph_id`)
        self.node_record = False  # visiting a graph node's _record (its capture)

    def _rename(self, name):
        return name if name in self.imported else _npu_word(name)

    def _source_of(self, node):
        """The source text of `node` (ast.get_source_segment splits the whole file at each call)."""
        first, last = node.lineno - 1, node.end_lineno - 1
        if first == last:
            return self.lines[first][node.col_offset : node.end_col_offset].decode()
        text = self.lines[first][node.col_offset :] + b"".join(self.lines[first + 1 : last])
        return (text + self.lines[last][: node.end_col_offset]).decode()

    def visit_Constant(self, node):
        # messages speak of NPU graphs (a string with a space; names such as counter keys or the "cudagraphs"
        # log artifact keep PyTorch's spelling)
        if isinstance(node.value, str) and " " in node.value:
            parts = re.split(r"(config\.triton\.\w+)", node.value)  # option names stay PyTorch's
            node.value = "".join(part if i % 2 else _npu_message(part) for i, part in enumerate(parts))
        return node

    def visit_If(self, node):
        if _chain(getattr(node.test, "func", None)) == "torch.backends.cuda.is_built":
            node.test = ast.copy_location(ast.Constant(True), node.test)  # the device is built: take its runtime
        return self.generic_visit(node)

    def visit_ImportFrom(self, node):
        if node.level > 0:  # relative to PyTorch's module, not to this one
            package = _SOURCE_MODULE.rsplit(".", node.level)[0]
            node.module, node.level = f"{package}.{node.module}" if node.module else package, 0
        if node.module == "torch._higher_order_ops.cudagraph_conditional_nodes":  # torch.cond in NPU graphs
            node.module = "torch_npu.npu._npugraph_conditional_nodes"
            for alias in node.names:
                if alias.name == "CUDAGraphCaptureControlFlowOpDispatchMode":
                    alias.name, alias.asname = "NPUGraphCaptureControlFlowOpDispatchMode", alias.asname or alias.name
            return node
        if node.module == "torch._C" and any(a.name == "_cuda_CUDAAllocator_AllocatorState" for a in node.names):
            state = ast.ImportFrom("torch_npu._C", [ast.alias("_npu_NPUAllocator_AllocatorState", "AllocatorState")], 0)
            rest = [a for a in node.names if a.name != "_cuda_CUDAAllocator_AllocatorState"]
            return [ast.copy_location(state, node), ast.copy_location(ast.ImportFrom("torch._C", rest, 0), node)]
        return node

    def visit_Expr(self, node):
        call = node.value
        if self.node_init and isinstance(call, ast.Call) and _chain(call.func) == "self.graph.replay":
            return None  # the capture ran the graph already (see the module doc)
        return self.generic_visit(node)

    def visit_With(self, node):
        if self.node_record:  # the capture ran the graph: its draws stay drawn (see the module doc)
            node.items = [
                i for i in node.items if _chain(getattr(i.context_expr, "func", None)) != "preserve_rng_state"
            ]
        return self.generic_visit(node)

    def visit_Assert(self, node):
        condition = self._source_of(node.test)
        message = node.msg if node.msg is not None else ast.Constant(f"check {condition} fail")
        error = ast.Raise(ast.Call(ast.Name("RuntimeError", ast.Load()), [self.visit(message)], []), None)
        check = ast.If(ast.UnaryOp(ast.Not(), self.visit(node.test)), [error], [])
        return ast.copy_location(check, node)

    def visit_ClassDef(self, node):
        self.classes.append(node.name)
        node.name = self._rename(node.name)
        self.generic_visit(node)
        self.classes.pop()
        return node

    def visit_FunctionDef(self, node):
        outer = self.node_init, self.node_record
        self.node_init = node.name == "__init__" and self.classes[-1:] in (["CUDAWarmupNode"], ["CUDAGraphNode"])
        self.node_record = node.name == "_record" and self.classes[-1:] == ["CUDAGraphNode"]
        args = node.args
        if self.node_init and [a.arg for a in args.args[-2:]] == ["mode", "compile_id"] and not args.defaults:
            args.defaults = [ast.Constant(None), ast.Constant(None)]  # a node built by hand has neither
        node.name = self._rename(node.name)
        self.generic_visit(node)
        self.node_init, self.node_record = outer
        return node

    def visit_arg(self, node):
        node.arg = "graph_id" if self.node_init and node.arg == "id" else self._rename(node.arg)
        return self.generic_visit(node)

    def visit_keyword(self, node):
        if node.arg is not None:
            node.arg = self._rename(node.arg)
        return self.generic_visit(node)

    def visit_Name(self, node):
        node.id = "graph_id" if self.node_init and node.id == "id" else self._rename(node.id)
        return node

    def visit_Attribute(self, node):
        chain = _chain(node)
        if chain is not None:
            parts = chain.split(".")
            if parts[:2] == ["torch", "_C"] and len(parts) == 3 and parts[2] in _RUNTIME:
                module, name = _RUNTIME[parts[2]]
                target = (
                    ast.Name(name, node.ctx) if module == __name__ else ast.Attribute(_dotted(module), name, node.ctx)
                )
                return ast.copy_location(target, node)
            if parts[:2] == ["torch", "cuda"]:
                return ast.copy_location(_dotted(".".join(["torch", "npu", *map(_npu_word, parts[2:])])), node)
            if parts[0] in ("torch", "config", "CallbackTrigger", "CheckInvariantStatus"):
                return node  # PyTorch's names, inductor's options
        node.value = self.visit(node.value)
        node.attr = "is_npu" if node.attr == "is_cuda" else self._rename(node.attr)
        return node


def _build():
    spec = importlib.util.find_spec(_SOURCE_MODULE)
    with open(spec.origin, encoding="utf-8") as source_file:
        source = source_file.read()
    tree = ast.parse(source, spec.origin)
    imported = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names}  # fmt: skip
    tree = ast.fix_missing_locations(_NpuGraphTree(source, imported).visit(tree))
    return compile(tree, spec.origin, "exec")


exec(_build(), globals())  # noqa: S102 - PyTorch's graph trees, rewritten for npu (see the module doc)
