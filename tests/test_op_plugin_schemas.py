"""Every schema of op-plugin's custom operator list (../shared/reference/op_plugin_custom_schemas.txt, the `custom:`
section of op_plugin_functions.yaml) exists as torch.ops.npu.<name>[.<overload>], but the three the README names
with their reason (a clone without ../shared skips this check)."""

import os
import re

import pytest
import torch

import torch_npu  # noqa: F401

SCHEMAS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    "shared", "reference", "op_plugin_custom_schemas.txt",
)  # fmt: skip
# The two Dimname overloads: PyTorch 2.13's schema parser has no Dimname type.
NOT_BUILT = {"npu_max.names_dim", "npu_min.names_dim"}


def _missing(names):
    missing = set()
    for name in names:
        base, _, overload = name.partition(".")
        packet = getattr(torch.ops.npu, base, None)
        if packet is None or (overload and overload not in packet.overloads()):
            missing.add(name)
    return missing


@pytest.mark.skipif(not os.path.isfile(SCHEMAS), reason="../shared/reference is not beside this checkout")
def test_every_op_plugin_custom_schema_exists_but_the_three_documented():
    with open(SCHEMAS, encoding="utf-8") as listing:
        names = [m.group(1) + (m.group(2) or "") for m in (re.match(r"^([A-Za-z_0-9]+)(\.[A-Za-z_0-9]+)?\(", line.strip()) for line in listing) if m]  # fmt: skip
    assert len(names) == 418
    assert _missing(names) == NOT_BUILT
