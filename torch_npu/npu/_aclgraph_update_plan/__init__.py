"""ACL graph update plans: how a captured graph's updatable operator arguments (attention's sequence lengths)
follow the inputs of the compiled function that replays it.

A compiled graph records, for each captured operator that has a graph handler with update specs, where each
updatable argument comes from: {"op": "npu_fusion_attention_v3.default", "updates": {"actual_seq_qlen": SOURCE}},
with SOURCE {"kind": "input", "index": i} (the function's i-th input), {"kind": "constant", "value": v} or
{"kind": "list", "items": [SOURCE, ...]}. The plan is stored on the compiled module under
ACLGRAPH_UPDATE_PLAN_GLOBAL (torch_npu._inductor._aclgraph_update_plan builds its entries); before a replay,
build_cpu_update_input_for_graph checks it against the graph's captured operators and turns it into
NPUGraph.update's cpu_update_input for the new inputs."""

from torch_npu.npu._aclgraph_update_plan.resolver import *  # noqa: F403  (the runtime half lives there)
from torch_npu.npu._aclgraph_update_plan.resolver import __all__  # noqa: F401
