"""NPU graph replay for the graph backends (npugraphs, npugraph_ex): CUDA graphs' rules on npu.

A compiled function (inductor's output, or an FX graph) runs normally the first time for each input
shape (warm-up), is captured into an NPU graph the second time, and is replayed afterwards:

* static inputs (parameters, buffers, the saved tensors a backward graph reads) are used where they
  are; a change of their memory makes a new graph be captured;
* other tensor inputs are copied into the graph's own input buffers before each replay;
* outputs are the graph's output buffers: the next replay overwrites them, as CUDA graphs do;
* a new input shape gets its own graph; all graphs of a device share one memory pool;
* a function that cannot be captured (host synchronisation, CPU tensors, inputs it mutates) runs
  without a graph from then on, and the skip is reported the way inductor reports cudagraph skips.

(mode="reduce-overhead" uses the NPU graph trees instead: torch_npu._inductor.reduce_overhead.)
"""

import torch

from torch_npu import _C
from torch_npu.npu._aclgraph_update_plan import resolve_aclgraph_update_plan
from torch_npu.npu.graphs import NPUGraph, graph, graph_pool_handle

_pools = {}


def _pool(device_index):
    if device_index not in _pools:
        _pools[device_index] = graph_pool_handle()
    return _pools[device_index]


def report_skip(reason):
    from torch._inductor.cudagraph_utils import log_cudagraph_skip_and_bump_counter

    log_cudagraph_skip_and_bump_counter(f"skipping npugraphs due to {reason}")


class _Recording:
    def __init__(self, npu_graph, inputs, outputs, updates=None):
        self.graph = npu_graph
        self.inputs = inputs
        self.outputs = outputs
        self.updates = updates  # the update plan's values the graph was captured or last updated with


class NpuGraphRunner:
    """Calls `fn` (boxed: it takes a list of inputs) through NPU graph capture and replay."""

    def __init__(
        self, fn, static_input_idxs, *, device_index, name="graph", max_recordings=None, update_plan=None
    ):  # fmt: skip
        self._boxed_call = True  # on the instance: wrappers copy the instance's attributes
        self.fn = fn
        self.max_recordings = max_recordings
        self.static = frozenset(static_input_idxs)
        self.static_mask = b""
        self.device_index = device_index
        self.name = name
        self.recordings = {}
        self.warmed_up = set()
        self.skip_reason = None
        # (plan, input indices): the updatable operator arguments that follow those inputs; a new value of them
        # updates the captured graph instead of capturing another (torch_npu.npu._aclgraph_update_plan)
        self.update_plan, self.plan_inputs = update_plan if update_plan is not None else (None, ())

    def __call__(self, args):
        """The boxed calling convention: takes the list of inputs and empties it."""
        inputs = list(args)
        args.clear()
        return self.call(inputs)

    def call(self, inputs):
        """Runs, captures or replays for a sequence of inputs (left as it is)."""
        if self.skip_reason is not None:
            return self.fn(inputs)
        if len(self.static_mask) != len(inputs):
            self.static_mask = bytes(i in self.static for i in range(len(inputs)))
        keyed = [None if i in self.plan_inputs else x for i, x in enumerate(inputs)] if self.plan_inputs else inputs
        key = _C._graph_input_key(keyed, self.static_mask)  # static inputs that moved make a new key
        recording = self.recordings.get(key)
        if recording is not None:
            if self.update_plan is not None:
                updates = resolve_aclgraph_update_plan(self.update_plan, inputs)
                if updates != recording.updates:  # the graph holds the last values it was given
                    recording.graph.update(updates)
                    recording.updates = updates
            recording.graph._recording.replay_with_inputs(recording.inputs, inputs, self.static_mask)
            return recording.outputs
        if key not in self.warmed_up:
            self.warmed_up.add(key)
            return self.fn(inputs)
        if (
            self.max_recordings is not None
            and key not in self.recordings
            and len(self.recordings) >= self.max_recordings
        ):
            return self.fn(inputs)  # beyond the capture limit: these shapes run without a graph
        return self._record(key, inputs)

    def _record(self, key, inputs):
        buffers = [
            x.clone() if isinstance(x, torch.Tensor) and i not in self.static else x for i, x in enumerate(inputs)
        ]
        npu_graph = NPUGraph()
        try:
            # with an update plan, its operators are captured as updatable calls (torch.npu.graph's
            # auto_dispatch_capture), which NPUGraph.update issues again with a replay's arguments
            updatable = self.update_plan is not None
            pool = _pool(self.device_index)
            with torch.npu.device(self.device_index), graph(npu_graph, pool=pool, auto_dispatch_capture=updatable):
                outputs = self.fn(list(buffers))
        except RuntimeError as e:
            self.skip_reason = str(e).splitlines()[0]
            report_skip(f"{self.name} cannot be captured: {self.skip_reason}")
            return self.fn(inputs)
        captured = resolve_aclgraph_update_plan(self.update_plan, inputs) if self.update_plan is not None else None
        self.recordings[key] = _Recording(npu_graph, buffers, outputs, captured)
        return outputs
