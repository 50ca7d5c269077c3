import os
import sys
import warnings

import pytest

# A profile the developer synced (`vnpu ops sync`) would make fallback warnings part of every test.
os.environ.setdefault("VNPU_OPS_PROFILE", "none")

import torch  # noqa: E402

import torch_npu  # noqa: F401,E402

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True)
def _seed_and_device():
    torch.manual_seed(0)
    previous = torch.npu.current_device() if torch.npu.is_initialized() else 0
    yield
    torch.npu.set_device(previous)


def pytest_configure(config):
    warnings.filterwarnings("ignore", message=".*TypedStorage is deprecated.*")
