"""Divergences the fuzzer can find that vnpu keeps, each with its reason. A finding is expected when
its kind is the one listed for an operator that its (minimised) program uses; expected findings are
reported but do not fail a campaign."""

import json

_RECURRENT_GRADIENTS = (
    "recurrent layers run the CPU's kernels as one npu operator (torch_npu/csrc/aten/HostRecurrent.cpp): forward "
    "and the layer's own gradients are the CPU's bits, but when the layer's input also feeds other operators, "
    "autograd adds the layer's contributions to that input's gradient as one sum where the CPU adds them one by one "
    "with the others, so the input's gradient may differ in the last bits"
)

EXPECTED = {
    # operator: (finding kind, reason)
    "lstm": ("grad", _RECURRENT_GRADIENTS),
    "gru": ("grad", _RECURRENT_GRADIENTS),
}


def expected_reason(finding):
    if not finding.program:
        return ""
    for step in json.loads(finding.program)["steps"]:
        kind, reason = EXPECTED.get(step["op"], (None, ""))
        if kind == finding.kind:
            return reason
    return ""
