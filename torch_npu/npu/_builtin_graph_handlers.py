"""The graph handlers torch_npu registers for its own operators: the fused inference attention operators
(v1 and v2) and the v3 fusion attention (forward and backward), whose sequence lengths change from one step to
the next. Captured with
auto_dispatch_capture, a functional call is switched to the .out overload with its results preallocated,
and NPUGraph.update(cpu_update_input=[{"actual_seq_lengths_kv": [...]}, ...]) issues it again with the
new lengths (any argument of the operator may be named)."""

from torch_npu.npu import _graph_dispatch
from torch_npu.npu.graphs import NpuGraphOpHandler, register_npu_graph_handler

__all__ = []


@register_npu_graph_handler(
    [
        "npu_fused_infer_attention_score",
        "npu_fused_infer_attention_score.default",
        "npu_fused_infer_attention_score.out",
        "npu_fused_infer_attention_score_v2",
        "npu_fused_infer_attention_score_v2.default",
        "npu_fused_infer_attention_score_v2.out",
        "npu_fusion_attention_v3",
        "npu_fusion_attention_v3.default",
        "npu_fusion_attention_v3.out",
        "npu_fusion_attention_grad_v3",
        "npu_fusion_attention_grad_v3.default",
        "npu_fusion_attention_grad_v3.out",
    ]
)
class _AttentionHandler(NpuGraphOpHandler):
    @classmethod
    def prepare_capture(cls, func, args, kwargs):
        return _graph_dispatch.default_prepare_capture(func, args, kwargs)

    @classmethod
    def get_update_specs(cls, op_name):
        """The sequence-length arguments of the operator, as torch_npu's (kind, position, name) triples:
        ("arg", schema index, name) for positional arguments, ("kwarg", name, name) for keyword-only ones."""
        return sequence_length_specs(op_name)


def sequence_length_specs(op_name):
    import torch

    name, _, overload = op_name.partition(".")
    packet = getattr(torch.ops.npu, name, None)
    if packet is None:
        return []
    schema = getattr(packet, overload or "default")._schema
    return [
        ("kwarg", a.name, a.name) if a.kwarg_only else ("arg", i, a.name)
        for i, a in enumerate(schema.arguments)
        if a.name.startswith("actual_seq")
    ]
