import os
import sys
import warnings

import pytest
import torch

import torch_npu  # noqa: F401

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def _seed_and_device():
    torch.manual_seed(0)
    previous = torch.npu.current_device() if torch.npu.is_initialized() else 0
    yield
    torch.npu.set_device(previous)


def pytest_configure(config):
    warnings.filterwarnings("ignore", message=".*TypedStorage is deprecated.*")
