import os
import sys
import warnings

import pytest

# A profile the developer synced (`vnpu ops sync`) would make fallback warnings part of every test.
os.environ.setdefault("VNPU_OPS_PROFILE", "none")
# An operator whose outputs alias its inputs or each other fails compiled tests everywhere, as it does where the
# CI variable is set (PyTorch only warns elsewhere).
os.environ.setdefault("TORCHINDUCTOR_ERROR_ON_CUSTOM_OP_ALIASING", "1")
# One intra-op thread per test process (inherited by the programs tests start): the suite runs at least one worker
# per core, and OpenMP regions with more threads than free cores wait for descheduled threads at every barrier
# (opinfo's pooling and convolution tests ran 5x slower beside one busy process with 2 threads than with 1).
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Inductor compiles in the process that compiles (inherited too): with more than one compile thread it first starts
# a pool of worker interpreters, each importing torch (about 4 s of CPU per compiling process on two busy cores).
# The nanoGPT client test keeps the pool, as its users run it.
os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
# torch's extension builds (DeepSpeed's JIT-built ops) in the environment's directory, where `make setup` built the
# DeepSpeed op the tests' CPU references load (inherited by the programs tests start).
_EXTENSIONS = os.path.join(sys.prefix, "torch_extensions")
if os.path.isdir(_EXTENSIONS):
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", _EXTENSIONS)

import torch  # noqa: E402

import torch_npu  # noqa: F401,E402

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
sys.path.insert(0, os.path.dirname(__file__))


def _compile_bytecode():
    """Writes the bytecode of torch_npu, vnpu and the tests' helper modules, as an installed package has it.
    The suite starts hundreds of interpreters (ranks, fresh-import checks, the CLI); where
    PYTHONDONTWRITEBYTECODE is set (as on CI), each would otherwise compile every module it imports from
    source (about 0.5 s of CPU per interpreter). py_compile writes regardless of that variable, and
    interpreters read what it wrote."""
    import compileall

    import vnpu

    for package in (torch_npu, vnpu):
        compileall.compile_dir(os.path.dirname(package.__file__), quiet=1)
    compileall.compile_dir(os.path.dirname(__file__), maxlevels=0, quiet=1)


if "PYTEST_XDIST_WORKER" not in os.environ:  # once, in the process that starts the workers
    _compile_bytecode()


def pytest_collection_finish(session):
    """What collection made (op_db's samples, the test modules, third-party packages: ~300,000 objects) lives as
    long as the process: frozen out of the garbage collector, so that the full collections tests ask for (npu
    tensors held in reference cycles are freed before the allocator's counters are read) and Python's own scan
    only what the tests made since (0.15-0.4 s of CPU each before)."""
    import gc

    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(config, items):
    """The tests marked long start first: pytest-xdist hands tests to its workers in collection order, so a long
    one collected late would run on after the others finished, with the rest of the machine idle."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


@pytest.fixture(autouse=True)
def _seed_and_device():
    torch.manual_seed(0)
    previous = torch.npu.current_device() if torch.npu.is_initialized() else 0
    yield
    torch.npu.set_device(previous)


def pytest_configure(config):
    warnings.filterwarnings("ignore", message=".*TypedStorage is deprecated.*")


@pytest.fixture(scope="session")
def once(tmp_path_factory, worker_id):
    """`once(key, compute)`: compute()'s JSON result, computed by the first test of the run that asks for `key`
    (on whichever xdist worker) and read back by every other test, on every worker. For third-party programs
    whose start-up costs more than their runs (a Trainer or Lightning process trains several configurations):
    the tests sharing them may run on different workers."""
    import hashlib
    import json

    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        shared = shared.parent  # the run's directory, above each worker's own

    def get(key, compute):
        path = shared / f"once-{hashlib.sha256(repr(key).encode()).hexdigest()[:16]}.json"
        with FileLock(f"{path}.lock"):
            if not path.exists():
                path.write_text(json.dumps(compute()))
            return json.loads(path.read_text())

    return get


@pytest.fixture(scope="session")
def synced(tmp_path_factory, once):
    """An environment whose vnpu cache holds the active profile of the torch-npu release matching torch,
    built by `vnpu ops sync` from the real wheel on PyPI (once per run)."""
    from subprocess_helpers import VNPU, run

    def with_cache(cache):
        env = dict(os.environ, VNPU_CACHE_DIR=cache)
        env.pop("VNPU_OPS_PROFILE", None)
        return env

    def sync():
        cache = str(tmp_path_factory.mktemp("vnpu_cache"))
        done = run(VNPU + ["ops", "sync"], with_cache(cache))
        if done.returncode != 0 and "could not download" in done.stdout + done.stderr:
            pytest.skip(f"PyPI is not reachable from this machine: {done.stdout.strip()[-300:]}")
        assert done.returncode == 0, done.stdout + done.stderr
        return cache

    return with_cache(once("vnpu ops sync", sync))


@pytest.fixture
def fresh_dynamo():
    """Each test compiles from scratch; compiled functions keep NPU graphs (and graph pools) alive in
    Dynamo's caches, so they are dropped afterwards."""
    import gc

    torch._dynamo.reset()
    gc.collect()
    yield
    torch._dynamo.reset()
    gc.collect()


@pytest.fixture
def fresh_allocator():
    """Every device's caching allocator without cached blocks and with its peaks reset: a test that checks
    pool layout or counters starts from what a fresh process would have (live tensors stay counted)."""
    import gc

    gc.collect()
    for device in range(torch.npu.device_count()):
        with torch.npu.device(device):
            torch.npu.empty_cache()
        torch.npu.reset_peak_memory_stats(device)
    yield
