"""Random numbers in captured NPU graphs, as torch_npu's (and CUDA's) graph-safe generators treat them.

- Capturing does not advance the generators: a replay draws from the state its generator has when it runs,
  and leaves it advanced by what the captured operators consumed (vnpu runs operators while capturing, so the
  default generator of the device and those passed to NPUGraph.register_generator_state are put back at the
  end of the capture).
- get_rng_state() during capture marks a point of the graph; set_rng_state() with such a state makes the replay
  return to the generator state it had at that point (torch.utils.checkpoint's preserve_rng_state relies on it).
  A state with another seed is refused, as is manual_seed() with another seed, with torch_npu's error.
"""

import torch

from torch_npu import _C

__all__ = []

SEED_CHANGE_ERROR = (
    "NPUGeneratorImpl::set_current_seed can be called during stream capture only if new seed is the same as the "
    "original seed."
)


def capturing_graph():
    """The NPUGraph capturing the current stream of this thread, or None."""
    from torch_npu.npu.graphs import _capturing

    if not _capturing:
        return None
    stream = torch.npu.current_stream()
    return _capturing.get((stream.stream_id, stream.device_index))


def hold_generators(graph, generators):
    """At capture start: the states to put back when the capture ends."""
    graph._rng_held = [(g, g.get_state()) for g in generators]
    graph._rng_points = []


def release_generators(graph):
    for generator, state in getattr(graph, "_rng_held", []):
        generator.set_state(state)
    graph._rng_held = []


def get_state(graph, generator):
    """get_rng_state during capture: the state now, and a replay-time mark of the same point."""
    state = generator.get_state()
    point = {}
    graph._rng_points.append((state, point))
    _C._graph_record_host_kernel("get_rng_state", lambda: point.__setitem__("state", generator.get_state()))
    return state


def _seed_of(state):
    probe = torch.Generator()
    probe.set_state(state)
    return probe.initial_seed()


def check_seed(generator, seed):
    if int(seed) != generator.initial_seed():
        raise RuntimeError(SEED_CHANGE_ERROR)


def set_state(graph, generator, state):
    """set_rng_state during capture: returns the replay to the marked point the state came from (or to the
    state itself when it was taken outside the capture)."""
    check_seed(generator, _seed_of(state))
    generator.set_state(state)
    marked = [point for taken, point in graph._rng_points if torch.equal(taken, state)]
    if marked:
        point = marked[-1]
        _C._graph_record_host_kernel("set_rng_state", lambda: generator.set_state(point["state"]))
    else:
        fixed = state.clone()
        _C._graph_record_host_kernel("set_rng_state", lambda: generator.set_state(fixed))
