"""The `npu` operator namespace (torch.ops.npu), shared by every torch_npu operator definition."""

import sys

import torch

npu_lib = torch.library.Library("npu", "DEF")  # noqa: TOR901  (definitions live for the process)


# operator name -> the module that defines it (docs/operator_tables.py groups the operators by family)
DEFINED_IN = {}


def record_definition(name, module):
    DEFINED_IN.setdefault(name.split(".")[0], module)


def define(schema):
    """Define `schema` in torch.ops.npu and return the operator's qualified name."""
    npu_lib.define(schema)
    record_definition(schema.split("(", 1)[0], sys._getframe(1).f_globals["__name__"])
    return "npu::" + schema.split("(", 1)[0]
