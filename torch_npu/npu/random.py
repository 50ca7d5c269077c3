"""NPU random number generation state: one generator per device, seeded lazily like torch.cuda."""

from collections.abc import Iterable

import torch

import torch_npu
from torch_npu import _C
from torch_npu.npu import _graph_rng
from torch_npu.npu.utils import _get_device_index

__all__ = [
    "get_rng_state",
    "get_rng_state_all",
    "set_rng_state",
    "set_rng_state_all",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "seed_all",
    "initial_seed",
]


def _generator(index: int) -> torch.Generator:
    return torch_npu.npu.default_generators[index]


def get_rng_state(device: int | str | torch.device = "npu") -> torch.Tensor:
    """The RNG state of an NPU as a ByteTensor."""
    torch_npu.npu._lazy_init()
    generator = _generator(_get_device_index(device, optional=True))
    graph = _graph_rng.capturing_graph()
    return generator.get_state() if graph is None else _graph_rng.get_state(graph, generator)


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(torch_npu.npu.device_count())]


def set_rng_state(new_state: torch.Tensor, device: int | str | torch.device = "npu") -> None:
    state = new_state.clone(memory_format=torch.contiguous_format)
    index = _get_device_index(device, optional=True)
    graph = _graph_rng.capturing_graph() if torch_npu.npu.is_initialized() else None
    if graph is not None:
        _graph_rng.set_state(graph, _generator(index), state)
        return
    torch_npu.npu._lazy_call(lambda: _generator(index).set_state(state))


def set_rng_state_all(new_states: Iterable[torch.Tensor]) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def manual_seed(seed: int) -> None:
    """Seed the current NPU's generator."""
    seed = int(seed)

    def cb():
        generator = _generator(_C._current_device())
        if _graph_rng.capturing_graph() is not None:  # a captured graph keeps its seed
            _graph_rng.check_seed(generator, seed)
            return
        generator.manual_seed(seed)

    torch_npu.npu._lazy_call(cb, seed=True)


def manual_seed_all(seed: int) -> None:
    """Seed the generators of all NPUs."""
    seed = int(seed)

    def cb():
        for i in range(torch_npu.npu.device_count()):
            _generator(i).manual_seed(seed)

    torch_npu.npu._lazy_call(cb, seed_all=True)


def seed() -> None:
    """Seed the current NPU's generator with a random number."""
    torch_npu.npu._lazy_call(lambda: _generator(_C._current_device()).seed())


def seed_all() -> None:
    """Seed all NPUs with one random number."""

    def cb():
        random_seed = 0
        for i in range(torch_npu.npu.device_count()):
            if i == 0:
                random_seed = _generator(0).seed()
            else:
                _generator(i).manual_seed(random_seed)

    torch_npu.npu._lazy_call(cb)


def initial_seed() -> int:
    torch_npu.npu._lazy_init()
    return _generator(_C._current_device()).initial_seed()
