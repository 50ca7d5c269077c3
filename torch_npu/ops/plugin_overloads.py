"""The further overloads of op-plugin's custom schema list: the `.out` overloads of op-plugin's custom schema list for operators vnpu defines functionally (npu_broadcast,
npu_conv2d, npu_conv3d, npu_indexing, npu_reshape, npu_slice, npu_sort_v2, npu_transpose, npu_fusion_attention_v3,
npu_fusion_attention_grad_v3), and npu_grouped_matmul.List (group_list as a list of ints). Each `.out` runs the
functional overload (defined in the modules imported here first) and writes its results into the given tensors (resized to the results' shapes, as PyTorch's
out= does); an accepted `workspace` is the card's scratch memory and goes unused."""

import torch

from torch_npu.ops import convolutions, fusion_attention_v3, quant, reduction_slicing, tensor_ops  # noqa: F401
from torch_npu.ops.quant import grouped_matmul_fake
from torch_npu.ops.registration import npu_op

__all__ = []

_SINGLE_OUT = (
    "npu_broadcast",
    "npu_conv2d",
    "npu_conv3d",
    "npu_indexing",
    "npu_reshape",
    "npu_slice",
    "npu_sort_v2",
    "npu_transpose",
)
_MULTI_OUT = {
    "npu_fusion_attention_v3": ("attention_score", "softmax_max", "softmax_sum", "softmax_out", "seed", "offset"),
    "npu_fusion_attention_grad_v3": ("dq", "dk", "dv", "dpse", "dsink"),
}


def _arguments(functional):
    """The functional overload's argument list, as schema text."""
    schema = str(functional._schema)
    return schema[schema.index("(") + 1 : schema.rindex(") -> ")]


def _written(results, outs):
    for result, out in zip(results, outs):
        out.resize_(result.shape)
        out.copy_(result)
    return outs


def _single_out(name):
    functional = getattr(torch.ops.npu, name).default
    arguments = _arguments(functional)

    def kernel(*args, out, **kwargs):
        return _written([functional(*args, **kwargs)], [out])[0]

    kernel.__doc__ = f"{name} written into out (resized to the result's shape); out returned."
    npu_op(f"{name}.out({arguments}, *, Tensor(a!) out) -> Tensor(a!)", fake=lambda *a, out, **k: out)(kernel)


def _multi_out(name, written):
    functional = getattr(torch.ops.npu, name).default
    arguments = _arguments(functional) + ", Tensor? workspace=None"
    letters = "abcdefgh"
    outs = ", ".join(f"Tensor({letters[i]}!) {n}" for i, n in enumerate(written))
    returns = ", ".join(f"Tensor({letters[i]}!)" for i in range(len(written)))
    separator = ", " if ", *," in arguments else ", *, "

    positional = sum(not a.kwarg_only for a in functional._schema.arguments)

    def kernel(*args, workspace=None, **kwargs):
        targets = [kwargs.pop(n) for n in written]
        return tuple(_written(functional(*args[:positional], **kwargs), targets))

    def fake(*args, **kwargs):
        return tuple(kwargs[n] for n in written)

    kernel.__doc__ = f"{name} written into {', '.join(written)}; they are returned."
    npu_op(f"{name}.out({arguments}{separator}{outs}) -> ({returns})", fake=fake)(kernel)


for _name in _SINGLE_OUT:
    _single_out(_name)
for _name, _written_names in _MULTI_OUT.items():
    _multi_out(_name, _written_names)


@npu_op(
    "npu_grouped_matmul.List(Tensor[] x, Tensor[] weight, *, Tensor[]? bias=None, Tensor[]? scale=None, "
    "Tensor[]? offset=None, Tensor[]? antiquant_scale=None, Tensor[]? antiquant_offset=None, "
    "Tensor[]? per_token_scale=None, int[]? group_list=None, Tensor[]? activation_input=None, "
    "Tensor[]? activation_quant_scale=None, Tensor[]? activation_quant_offset=None, int? split_item=0, "
    "int? group_type=None, int? group_list_type=0, int? act_type=0, ScalarType? output_dtype=None) -> Tensor[]",
    fake=grouped_matmul_fake,
)
def npu_grouped_matmul_list(x, weight, *, group_list=None, output_dtype=None, **kwargs):
    """npu_grouped_matmul with group_list given as a list of ints."""
    groups = None if group_list is None else torch.tensor(group_list, dtype=torch.int64, device=x[0].device)
    return torch.ops.npu.npu_grouped_matmul.default(x, weight, group_list=groups, output_dtype=output_dtype, **kwargs)
