"""The hccl backend across processes (2 and 4 ranks on this machine), each run bounded by a timeout."""
import os
import socket
import subprocess
import sys
import time

import pytest
import torch.distributed as dist

WORKER = os.path.join(os.path.dirname(__file__), "distributed_worker.py")


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(case, world, timeout=240, extra_env=None):
    """Start `world` ranks of distributed_worker.py; returns [(returncode, output)] per rank."""
    port = _port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), VNPU_OPS_PROFILE="none", OMP_NUM_THREADS="1", **(extra_env or {}))
        procs.append(subprocess.Popen([sys.executable, WORKER, case], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    deadline = time.time() + timeout
    results = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"{case} with {world} ranks did not finish within {timeout} s")
        results.append((p.returncode, out))
    return results


def _all_ok(results):
    for rank, (code, out) in enumerate(results):
        assert code == 0 and out.strip().endswith("ok"), f"rank {rank} exited {code}:\n{out[-3000:]}"


@pytest.mark.parametrize("world", [2, 4])
def test_every_collective_matches_its_single_process_reference(world):
    _all_ok(launch("collectives", world))


def test_ddp_training_equals_single_process_training_on_cpu():
    _all_ok(launch("ddp", 2))


def test_sync_batch_norm_equals_batch_norm_over_the_full_batch():
    _all_ok(launch("syncbn", 2))


def test_a_dead_rank_makes_the_others_fail_naming_the_collective_within_the_timeout():
    start = time.time()
    results = launch("dead_rank", 2, timeout=60, extra_env={"HCCL_EXEC_TIMEOUT": "10"})
    elapsed = time.time() - start
    code, out = results[0]
    assert results[1][0] == 3
    assert code == 7, out[-3000:]
    assert "hccl allreduce on group" in out and "failed" in out and "ERR02200" in out, out[-3000:]
    assert elapsed < 10 + 10 + 15, elapsed  # the timeout, the allowance, and two interpreters starting


def test_backend_registration_and_options():
    import torch_npu
    from torch_npu._C._distributed_c10d import ProcessGroupHCCL

    assert "HCCL" in dist.Backend._plugins and "LCCL" in dist.Backend._plugins
    options = ProcessGroupHCCL.Options()
    options.hccl_config = {"hccl_buffer_size": 200}
    assert options.hccl_config["hccl_buffer_size"] == 200 and options.is_high_priority_stream is False
    assert dist.is_hccl_available() and torch_npu.distributed.is_hccl_available()
