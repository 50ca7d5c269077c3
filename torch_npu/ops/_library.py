"""The `npu` operator namespace (torch.ops.npu), shared by every torch_npu operator definition."""

import torch

npu_lib = torch.library.Library("npu", "DEF")  # noqa: TOR901  (definitions live for the process)


def define(schema):
    """Define `schema` in torch.ops.npu and return the operator's qualified name."""
    npu_lib.define(schema)
    return "npu::" + schema.split("(", 1)[0]
