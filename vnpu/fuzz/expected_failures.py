"""Divergences the fuzzer can find that vnpu keeps, each with its reason. A finding is expected when
its kind is the one listed for an operator that its (minimised) program uses; expected findings are
reported but do not fail a campaign."""

import json

EXPECTED = {
    # operator: (finding kind, reason)
    "randn_like": (
        "error",
        "integer and bool tensors: the card's normal kernel (aclnnInplaceNormal) fills them, as vnpu does; the CPU's "
        "refuses them",
    ),
}


def expected_reason(finding):
    if not finding.program:
        return ""
    for step in json.loads(finding.program)["steps"]:
        kind, reason = EXPECTED.get(step["op"], (None, ""))
        if kind == finding.kind:
            return reason
    return ""
