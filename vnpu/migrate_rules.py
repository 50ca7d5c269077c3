"""The rewrite rules of `vnpu migrate`, as a libcst transformer (comments and formatting survive).

Rewritten: device strings ('cuda', 'cuda:1', f'cuda:{rank}') -> npu; 'nccl' -> 'hccl';
'CUDA_VISIBLE_DEVICES' -> 'ASCEND_RT_VISIBLE_DEVICES'; x.cuda(...) -> x.npu(...); x.is_cuda -> x.is_npu;
torch.cuda.* (incl. torch.cuda.amp) -> torch.npu.*; imports from torch.cuda -> torch_npu.npu;
`from apex import amp` -> torch_npu.contrib's apex-style amp; `import torch_npu` after `import torch`.
Reported, with a suggestion (no automatic equivalent): CUDA-only libraries (flash_attn, xformers, apex's
fused layers and optimizers, cupy, pycuda, triton kernels, bitsandbytes), CUDA C++ extensions, cuDNN
settings, NVTX, torch.version.cuda probes. Every rule leaves already-migrated code unchanged, so
migrating twice changes nothing more.
"""

import re

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import PositionProvider

_DEVICE = re.compile(r"cuda(:\d+)?")
_EXACT_STRINGS = {"nccl": "hccl", "CUDA_VISIBLE_DEVICES": "ASCEND_RT_VISIBLE_DEVICES"}

# module prefix -> (why, suggestion)
UNSUPPORTED_MODULES = {
    "flash_attn": (
        "FlashAttention's CUDA kernels",
        "torch_npu.npu_fusion_attention (layouts BSH/BSND/BNSD/TND; "
        "transformers' attn_implementation='flash_attention_2' uses it)",
    ),
    "xformers": (
        "CUDA attention kernels",
        "torch_npu.npu_fusion_attention or torch.nn.functional." "scaled_dot_product_attention",
    ),
    "apex.normalization": ("apex's fused CUDA layer norms", "torch.nn.LayerNorm / torch_npu.npu_rms_norm"),
    "apex.optimizers": (
        "apex's fused CUDA optimizers",
        "torch_npu.optim.NpuFusedAdamW / NpuFusedAdam / " "NpuFusedSGD",
    ),
    "apex.contrib": ("apex's CUDA extensions", "the torch_npu.npu_* fused operators"),
    "apex.parallel": ("apex's CUDA data parallelism", "torch.nn.parallel.DistributedDataParallel with hccl"),
    "cupy": ("a CUDA array library", "torch tensors on npu (or numpy on the host)"),
    "pycuda": ("CUDA driver bindings", "torch.npu streams, events and memory APIs"),
    "triton": (
        "Triton GPU kernels",
        "torch operations or torch_npu.npu_* fused operators (or Ascend C kernels " "through NpuExtension)",
    ),
    "bitsandbytes": ("CUDA quantisation kernels", "torch_npu.npu_quant_matmul / npu_weight_quant_batchmatmul"),
    "torch.cuda.nvtx": ("NVTX ranges", "torch_npu.npu.mstx.range_start / range_end / mark"),
}
UNSUPPORTED_CALLS = {
    "CUDAExtension": ("a CUDA C++ extension", "build the kernel for Ascend with torch_npu's NpuExtension"),
    "torch.utils.cpp_extension.CUDAExtension": ("a CUDA C++ extension", "torch_npu's NpuExtension"),
    "triton.jit": ("a Triton GPU kernel", "torch operations or torch_npu.npu_* fused operators"),
    "triton.autotune": ("a Triton GPU kernel", "torch operations or torch_npu.npu_* fused operators"),
}
UNSUPPORTED_ATTRIBUTES = {
    "torch.backends.cudnn": (
        "cuDNN settings have no effect on Ascend",
        "drop them; for determinism use torch.use_deterministic_algorithms(True)",
    ),
    "torch.version.cuda": ("probes the CUDA toolkit version", "test torch.npu.is_available() instead"),
}

_REPORTED_ATTRIBUTES = {**UNSUPPORTED_ATTRIBUTES, "torch.cuda.nvtx": UNSUPPORTED_MODULES["torch.cuda.nvtx"]}


def _device_string(value):
    """The npu spelling of a device string, or None when it is not one."""
    if _DEVICE.fullmatch(value):
        return "npu" + value[4:]
    return _EXACT_STRINGS.get(value)


def _import_name(node):
    return get_full_name_for_node(node) or ""


class MigrationTransformer(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self):
        super().__init__()
        self.unsupported = []  # (line, API, why, suggestion)
        self.imports_torch = False
        self.imports_torch_npu = False

    def _report(self, node, api, why, suggestion):
        line = self.get_metadata(PositionProvider, node).start.line
        self.unsupported.append((line, api, why, suggestion))

    # --- strings
    def leave_SimpleString(self, original, updated):
        value = updated.evaluated_value
        if not isinstance(value, str):
            return updated
        new = _device_string(value)
        if new is None:
            return updated
        quote = updated.quote
        return updated.with_changes(value=updated.prefix + quote + new + quote)

    def leave_FormattedString(self, original, updated):
        parts = list(updated.parts)
        if (
            parts
            and isinstance(parts[0], cst.FormattedStringText)
            and parts[0].value.startswith("cuda:")
            and len(parts) > 1
        ):
            parts[0] = parts[0].with_changes(value="npu:" + parts[0].value[len("cuda:") :])
            return updated.with_changes(parts=parts)
        return updated

    # --- attributes and calls
    def visit_Attribute(self, node):
        name = get_full_name_for_node(node) or ""
        if name in _REPORTED_ATTRIBUTES:
            self._report(node, name, *_REPORTED_ATTRIBUTES[name])
        return True

    def leave_Attribute(self, original, updated):
        if isinstance(updated.value, cst.Name) and updated.value.value == "torch" and updated.attr.value == "cuda":
            return updated.with_changes(attr=cst.Name("npu"))
        if updated.attr.value == "is_cuda":
            return updated.with_changes(attr=cst.Name("is_npu"))
        return updated

    def visit_Call(self, node):
        name = get_full_name_for_node(node.func) or ""
        if name in UNSUPPORTED_CALLS:
            self._report(node, name, *UNSUPPORTED_CALLS[name])
        return True

    def leave_Call(self, original, updated):
        func = updated.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "cuda"
            and not (isinstance(func.value, cst.Name) and func.value.value == "torch")
        ):
            return updated.with_changes(func=func.with_changes(attr=cst.Name("npu")))
        return updated

    def visit_Decorator(self, node):
        target = node.decorator.func if isinstance(node.decorator, cst.Call) else node.decorator
        name = get_full_name_for_node(target) or ""
        if name in UNSUPPORTED_CALLS:
            self._report(node, name, *UNSUPPORTED_CALLS[name])
        return True

    # --- imports (their dotted names are not expressions: handled here, children not rewritten)
    def _check_module(self, node, module):
        if module == "torch" or module.startswith("torch."):
            self.imports_torch = True
        if module == "torch_npu" or module.startswith("torch_npu."):
            self.imports_torch_npu = True
        for prefix, (why, suggestion) in UNSUPPORTED_MODULES.items():
            if module == prefix or module.startswith(prefix + "."):
                self._report(node, module, why, suggestion)
                return

    def visit_Import(self, node):
        for alias in node.names:
            self._check_module(node, _import_name(alias.name))
        return False

    def leave_Import(self, original, updated):
        names = []
        for alias in updated.names:
            module = _import_name(alias.name)
            if module.startswith("torch.cuda"):
                new = "torch_npu.npu" + module[len("torch.cuda") :]
                alias = alias.with_changes(name=cst.parse_expression(new))
            names.append(alias)
        return updated.with_changes(names=names)

    def visit_ImportFrom(self, node):
        module = _import_name(node.module) if node.module is not None else ""
        if module == "apex" and not isinstance(node.names, cst.ImportStar):
            imported = {_import_name(a.name) for a in node.names}
            for name in sorted(imported - {"amp"}):
                self._check_module(node, f"apex.{name}")
        else:
            self._check_module(node, module)
        return False

    def leave_ImportFrom(self, original, updated):
        module = _import_name(updated.module) if updated.module is not None else ""
        if module == "torch.cuda" or module.startswith("torch.cuda."):
            return updated.with_changes(module=cst.parse_expression("torch_npu.npu" + module[len("torch.cuda") :]))
        if (
            module == "apex"
            and not isinstance(updated.names, cst.ImportStar)
            and [_import_name(a.name) for a in updated.names] == ["amp"]
        ):
            return updated.with_changes(module=cst.parse_expression("torch_npu.contrib"))
        return updated

    # --- import torch_npu after the first module-level `import torch`
    def leave_Module(self, original, updated):
        if not self.imports_torch or self.imports_torch_npu:
            return updated
        body = list(updated.body)
        for i, statement in enumerate(body):
            if isinstance(statement, cst.SimpleStatementLine) and any(
                isinstance(s, (cst.Import, cst.ImportFrom)) and _imports_torch(s) for s in statement.body
            ):
                body.insert(i + 1, cst.parse_statement("import torch_npu\n"))
                return updated.with_changes(body=body)
        return updated


def _imports_torch(statement):
    if isinstance(statement, cst.Import):
        return any(
            _import_name(a.name) == "torch" or _import_name(a.name).startswith("torch.") for a in statement.names
        )
    module = _import_name(statement.module) if statement.module is not None else ""
    return module == "torch" or module.startswith("torch.")


def migrate_source(source):
    """(new source, unsupported [(line, API, why, suggestion)]); raises libcst.ParserSyntaxError."""
    wrapper = cst.metadata.MetadataWrapper(cst.parse_module(source))
    transformer = MigrationTransformer()
    module = wrapper.visit(transformer)
    return module.code, sorted(set(transformer.unsupported))


# a value after ':' or '=' (YAML, JSON, INI, shell): cuda, "cuda:0", 'cuda'
_TEXT_DEVICE = re.compile(r"""([:=]\s*)(["']?)cuda(:\d+)?\2(?=\s*(?:[#,\]}]|$))""", re.MULTILINE)


_TEXT_NCCL = re.compile(r"""([:=]\s*)(["']?)nccl\2(?=\s*(?:[#,\]}]|$))""", re.MULTILINE)


def migrate_text(text):
    """Configs and shell scripts: device values ('cuda', "cuda:0"), nccl backends, CUDA_VISIBLE_DEVICES."""
    text = text.replace("CUDA_VISIBLE_DEVICES", "ASCEND_RT_VISIBLE_DEVICES")
    text = _TEXT_NCCL.sub(lambda m: f"{m.group(1)}{m.group(2)}hccl{m.group(2)}", text)
    return _TEXT_DEVICE.sub(lambda m: f"{m.group(1)}{m.group(2)}npu{m.group(3) or ''}{m.group(2)}", text)
