"""The hccl backend across processes (2 and 4 ranks on this machine), each run bounded by a timeout."""

import concurrent.futures
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

import pytest
import torch
import torch.distributed as dist
from subprocess_helpers import free_port, run_process_group

import torch_npu

WORKER = os.path.join(os.path.dirname(__file__), "distributed_worker.py")
LAUNCHER = os.path.join(os.path.dirname(__file__), "rank_launcher.py")


def launch(case, world, timeout=240, extra_env=None, ranks=None, worker=WORKER):
    """Start `world` ranks (or only `ranks`) of `worker` (distributed_worker.py); returns [(returncode, output)]
    per rank. The ranks are processes forked by one rank_launcher.py, which imports torch once for all of them;
    at the timeout the launcher and every rank are killed."""
    env = dict(
        os.environ,
        WORLD_SIZE=str(world),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(free_port()),
        VNPU_OPS_PROFILE="none",
        OMP_NUM_THREADS="1",
        **(extra_env or {}),
    )
    with tempfile.TemporaryDirectory() as scratch:
        chosen = list(ranks if ranks is not None else range(world))
        outputs = [os.path.join(scratch, f"rank{rank}.log") for rank in chosen]
        spec = {
            "worker": worker,
            "args": [case],
            "ranks": [
                {"env": {"RANK": str(rank), "LOCAL_RANK": str(rank)}, "output": output}
                for rank, output in zip(chosen, outputs)
            ],
        }
        spec_file = os.path.join(scratch, "spec.json")
        with open(spec_file, "w") as f:
            json.dump(spec, f)
        launcher = run_process_group([sys.executable, LAUNCHER, spec_file], env, timeout)
        assert launcher.returncode == 0, f"the rank launcher failed ({launcher.returncode}): {launcher.stderr[-3000:]}"
        codes = json.loads(launcher.stdout.strip().splitlines()[-1])
        results = []
        for code, output in zip(codes, outputs):
            with open(output) as f:
                results.append((code, f.read()))
    return results


def _all_ok(results):
    for rank, (code, out) in enumerate(results):
        assert code == 0 and out.strip().endswith("ok"), f"rank {rank} exited {code}:\n{out[-3000:]}"


@pytest.mark.parametrize("world", [2, 4])
def test_every_collective_matches_its_single_process_reference(world):
    _all_ok(launch("collectives", world))


@pytest.mark.parametrize("case", ["compiled_collectives", "compiled_tensor_parallel_training"])
def test_collectives_in_inductor_compiled_code_equal_eager(case):
    _all_ok(launch(case, 2, timeout=400))


def test_sequence_numbers_gather_and_autograd_all_gather_on_hccl_groups():
    _all_ok(launch("torch_npu_c10d", 2))


def test_reinit_process_group_rebuilds_and_resumes_the_link():
    _all_ok(launch("reinit", 2, timeout=120))


def test_matmul_collective_operators_equal_their_collectives_written_out():
    _all_ok(launch("matmul_collectives", 2))


def test_all_to_all_matmul_operators_equal_their_exchange_written_out():
    _all_ok(launch("all_to_all_matmul", 2))


def test_quantised_all_to_all_matmul_operators_equal_their_formulas():
    _all_ok(launch("quant_all_to_all_matmul", 2))


def test_quantised_alltoallv_gmm_operators_equal_the_dequantised_ones():
    _all_ok(launch("quant_alltoallv_gmm", 2))


def test_quantised_matmul_collectives_equal_their_dequantised_products():
    _all_ok(launch("quant_matmul_collectives", 2))


def test_alltoallv_grouped_matmul_operators_equal_their_exchange_written_out():
    _all_ok(launch("alltoallv_gmm", 2))


def test_distribute_barrier_waits_for_every_live_rank():
    _all_ok(launch("distribute_barrier", 3))


def test_moe_distribute_setup_and_teardown_equal_the_one_call_forms():
    _all_ok(launch("moe_distribute_phases", 2))


def test_moe_distribute_dispatch_and_combine_equal_the_routing_written_out():
    _all_ok(launch("moe_distribute", 2))


@pytest.mark.parametrize("world", [4, 6])  # 4: two shared-expert ranks, two experts per MoE rank; 6: EP 3 x TP 2
def test_moe_distribute_with_shared_expert_ranks_and_the_tp_domain(world):
    _all_ok(launch("moe_distribute_domains", world))


@pytest.mark.parametrize("world", [4, 6])
def test_moe_distribute_v2_sends_only_what_x_active_mask_lets_take_part(world):
    _all_ok(launch("moe_distribute_active_masks", world))


def test_moe_distribute_v2_elastic_scaling_exchanges_among_the_live_ranks():
    _all_ok(launch("moe_distribute_elastic", 4))


def test_moe_distribute_v2_special_experts_are_computed_on_the_tokens_rank():
    _all_ok(launch("moe_distribute_special_experts", 2))


@pytest.mark.parametrize("world", [2, 4])
def test_uneven_all_gather_and_reduce_scatter(world):
    _all_ok(launch("uneven", world))


@pytest.mark.parametrize("world", [2, 3])
def test_all_to_all_vc_moves_the_counts_of_the_shared_matrix(world):
    _all_ok(launch("all_to_all_vc", world))


def test_ddp_training_equals_single_process_training_on_cpu():
    _all_ok(launch("ddp", 2))


def test_sync_batch_norm_equals_batch_norm_over_the_full_batch():
    _all_ok(launch("syncbn", 2))


@pytest.mark.parametrize("case", ["fsdp2", "fsdp1"])
def test_fsdp_training_equals_single_process_training_on_cpu(case):
    _all_ok(launch(case, 2))


def test_dtensor_on_an_npu_device_mesh():
    _all_ok(launch("dtensor", 2))


def test_torch_npu_operators_run_on_sharded_dtensors():
    _all_ok(launch("dtensor_npu_operators", 2))


def test_fusion_attention_on_dtensors_sharded_over_batch_or_heads():
    _all_ok(launch("dtensor_fusion_attention", 2))


def test_distributed_checkpoint_save_and_load(tmp_path):
    _all_ok(launch("checkpoint", 2, extra_env={"CHECKPOINT_DIR": str(tmp_path / "ckpt")}))


def test_pipelining_on_two_stages():
    _all_ok(launch("pipeline", 2))


def test_mismatched_collectives_are_reported_with_desync_debug():
    _all_ok(launch("desync", 2, extra_env={"TORCH_HCCL_DESYNC_DEBUG": "1"}))


@pytest.mark.parametrize(
    "timeout_setting",
    [{"HCCL_EXEC_TIMEOUT": "10"}, {"OP_TIMEOUT": "10"}],
    ids=["HCCL_EXEC_TIMEOUT", "Options.op_timeout"],
)
def test_a_dead_rank_makes_the_others_fail_naming_the_collective_within_the_timeout(timeout_setting):
    start = time.time()
    results = launch("dead_rank", 2, timeout=60, extra_env=timeout_setting)
    elapsed = time.time() - start
    code, out = results[0]
    assert results[1][0] == 3
    assert code == 7, out[-3000:]
    assert "hccl allreduce on group" in out and "failed" in out and "ERR02200" in out, out[-3000:]
    assert elapsed < 10 + 10 + 15, elapsed  # the timeout, the allowance, and the rank launcher starting
    # on the shared-memory link the exit itself is noticed, long before the timeout
    assert "the process of rank 1" in out and "exited" in out, out[-3000:]
    assert float(out.split("ERROR after ")[1].split("s")[0]) < 3, out[-3000:]


@pytest.mark.parametrize("world", [2, 4])
def test_collectives_over_the_intra_host_link_are_the_rank_order_reduction_bit_for_bit(world):
    _all_ok(launch("intra_host_link", world))


@pytest.mark.parametrize("world", [2, 3])
def test_large_allreduces_allgathers_and_reduce_scatters_run_in_place_on_the_ranks_npu_memory(world):
    _all_ok(launch("intra_host_in_place", world))


def test_a_peer_range_the_host_refuses_to_map_fails_the_link_for_every_rank_at_once():
    (code0, out0), (code1, out1) = launch(
        "intra_host_unmappable_peer", 2, timeout=60, extra_env={"HCCL_EXEC_TIMEOUT": "20"}
    )
    assert code0 == 7, out0[-3000:]
    assert (
        "hccl allreduce on group 0 (rank 0 of 2) failed: the intra-host link cannot map 33554432 bytes of rank 1's "
        "npu memory: Cannot allocate memory" in out0
    ), out0[-3000:]
    assert code1 == 7, out1[-3000:]
    assert (
        "failed: the group's intra-host link was abandoned by rank 0 (a timeout or a lost peer); the group cannot "
        "run collectives any more" in out1
    ), out1[-3000:]
    for out in (out0, out1):  # released at once, not at the 20 s timeout
        assert float(out.split("ERROR after ")[1].split("s")[0]) < 10, out[-3000:]


def test_hccl_intra_roce_enable_keeps_one_hosts_ranks_on_the_network_transport():
    _all_ok(launch("intra_host_link", 2, extra_env={"HCCL_INTRA_ROCE_ENABLE": "1", "HCCL_INTRA_PCIE_ENABLE": "0"}))


def test_pcie_and_roce_both_enabled_is_refused():
    code, out = launch(
        "intra_host_link", 2, timeout=60, extra_env={"HCCL_INTRA_ROCE_ENABLE": "1", "HCCL_INTRA_PCIE_ENABLE": "1"}
    )[0]
    assert code != 0 and "HCCL_INTRA_PCIE_ENABLE and HCCL_INTRA_ROCE_ENABLE cannot both be 1" in out, out[-3000:]


def test_sizes_that_differ_between_ranks_are_refused_on_the_intra_host_link():
    _all_ok(launch("intra_host_mismatch", 4))


def test_a_late_rank_times_out_the_others_and_then_finds_the_link_abandoned():
    start = time.time()
    (code0, out0), (code1, out1) = launch("intra_host_late_rank", 2, timeout=60, extra_env={"HCCL_EXEC_TIMEOUT": "2"})
    assert code0 == 7 and "timed out waiting for rank(s) 1 of the group at the intra-host link" in out0, out0[-3000:]
    assert "ERR02200" in out0 and float(out0.split("ERROR after ")[1].split("s")[0]) < 2 + 2, out0[-3000:]
    assert code1 == 7 and "abandoned by rank 0" in out1, out1[-3000:]
    assert time.time() - start < 6 + 10 + 15


@pytest.mark.parametrize(
    "link", [{}, {"HCCL_INTRA_ROCE_ENABLE": "1", "HCCL_INTRA_PCIE_ENABLE": "0"}], ids=["intra-host", "transport"]
)
def test_an_ephemeral_timeout_extends_the_next_collective_until_it_finished(link):
    (code0, out0), (code1, out1) = launch("ephemeral_timeout", 2, timeout=90, extra_env=link)
    survived = float(out1.split("SURVIVED ")[1].split("s")[0])
    assert 3 <= survived < 8, out1[-3000:]  # past the 2 s base timeout, within base + extension
    assert code1 == 7 and float(out1.split("ERROR after ")[1].split("s")[0]) < 4, out1[-3000:]  # base again
    assert code0 == 7, out0[-3000:]  # its peer gave up: rank 0's last collective fails too


def test_group_timeouts_must_be_positive_and_extensions_not_negative():
    from subprocess_helpers import run_python

    done = run_python(
        """
        import datetime, os, torch, torch_npu, torch.distributed as dist
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(__PORT__))
        dist.init_process_group("hccl", rank=0, world_size=1)
        backend = dist.group.WORLD._get_backend(torch.device("npu"))
        for call, value in ((backend._set_default_timeout, 0), (backend._add_ephemeral_timeout, -1)):
            try:
                call(datetime.timedelta(seconds=value))
            except RuntimeError as err:
                print(str(err).splitlines()[0])
        t = torch.ones(2, device="npu")
        dist.all_reduce(t)
        print(t.sum().item())
        dist.destroy_process_group()
    """.replace("__PORT__", str(free_port())),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "the timeout of an hccl group must be positive, got 0 ms" in done.stdout
    assert "an ephemeral timeout extension cannot be negative, got -1000 ms" in done.stdout
    assert done.stdout.strip().endswith("2.0")


SCRIPT = os.path.join(os.path.dirname(__file__), "torchrun_script.py")


def _env():
    return dict(os.environ, VNPU_OPS_PROFILE="none", OMP_NUM_THREADS="1")


def test_torchrun_starts_npu_workers_on_their_local_devices():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--master-port",
            str(free_port()),
            SCRIPT,
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=_env(),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rank 0/2 device npu:0 sum 3.0" in done.stdout and "rank 1/2 device npu:1 sum 3.0" in done.stdout


def test_torch_npu_run_over_two_nodes_on_localhost():
    launcher = os.path.join(os.path.dirname(sys.executable), "torch_npu_run")
    assert os.path.exists(launcher), "the torch_npu_run console script is installed with the package"
    port = str(free_port())
    nodes = [
        subprocess.Popen(
            [
                launcher,
                "--nnodes",
                "2",
                "--node-rank",
                str(node),
                "--nproc-per-node",
                "1",
                "--master-addr",
                "127.0.0.1",
                "--master-port",
                port,
                "--enable_tiered_parallel_tcpstore",
                "true",
                SCRIPT,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        for node in (0, 1)
    ]
    outputs = []
    for node in nodes:
        out, err = node.communicate(timeout=240)
        assert node.returncode == 0, out + err
        outputs.append(out)
    assert "rank 0/2 device npu:0 sum 3.0" in outputs[0] and "rank 1/2 device npu:0 sum 3.0" in outputs[1]


def test_parallel_store_and_the_parallel_rendezvous():
    import datetime

    from torch_npu._C._distributed_c10d import ParallelStore

    assert torch_npu.ParallelStore is ParallelStore and "ParallelStore" not in torch_npu.__all__
    timeout, port = datetime.timedelta(seconds=30), free_port()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # the server waits for its world of clients
        serving = pool.submit(ParallelStore, "127.0.0.1", port, 2, False, -1, True, False, timeout)
        client = ParallelStore("127.0.0.1", port, 2, False, -1, False, True, timeout)
        server = serving.result(timeout=60)
    client.set("key", "value")
    assert server.get("key") == b"value" and isinstance(server, dist.Store) and client.enable_tiered is True
    with pytest.raises(dist.DistStoreError) as info:  # no client comes: the half-made store stays a safe object
        ParallelStore("127.0.0.1", free_port(), 2, False, -1, True, False, datetime.timedelta(seconds=1))
    frame = info.tb
    while frame.tb_next:
        frame = frame.tb_next
    unfinished = next(v for v in frame.tb_frame.f_locals.values() if isinstance(v, ParallelStore))
    assert "ParallelStore object" in repr(unfinished) and not hasattr(unfinished, "port")
    with pytest.raises(ValueError) as info:
        ParallelStore("127.0.0.1", 70000, 1, False, -1, True, False, timeout)
    assert str(info.value) == "port must have value from 0 to 65535 but was 70000."
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import torch, torch_npu, torch.distributed as dist\n"
            f"dist.init_process_group('hccl', init_method='parallel://127.0.0.1:{free_port()}?rank=0&world_size=1')\n"
            "t = torch.ones(2, device='npu'); dist.all_reduce(t); print(t.sum().item())\n"
            "dist.destroy_process_group()\n"
            "try:\n"
            "    dist.init_process_group('hccl', init_method='parallel://127.0.0.1:1234?world_size=1')\n"
            "except ValueError as e:\n"
            "    print(e)\n",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    assert proc.stdout.splitlines() == [
        "2.0",
        "Error initializing torch_npu.distributed using parallel:// rendezvous: rank parameter missing",
    ], proc.stdout + proc.stderr


def test_a_rank_that_never_arrives_fails_the_others_within_hccl_connect_timeout():
    start = time.time()
    alone = launch("collectives", 2, timeout=60, extra_env={"HCCL_CONNECT_TIMEOUT": "5"}, ranks=[0])
    code, out = alone[0]
    assert code != 0 and "hccl link setup did not complete within HCCL_CONNECT_TIMEOUT=5 s" in out, out[-3000:]
    assert "ERR02011 DIST timeout error" in out and time.time() - start < 5 + 10 + 10


def test_backend_registration_and_options():
    import torch_npu
    from torch_npu._C._distributed_c10d import ProcessGroupHCCL

    assert "HCCL" in dist.Backend._plugins and "LCCL" in dist.Backend._plugins
    options = ProcessGroupHCCL.Options()
    options.hccl_config = {"hccl_buffer_size": 200}
    assert options.hccl_config["hccl_buffer_size"] == 200 and options.is_high_priority_stream is False
    # torch_npu binds the fields on the class: MindSpeed-LLM probes hasattr(Options, "hccl_config") before using it
    for field in ("hccl_config", "is_high_priority_stream", "global_ranks_in_group", "group_id", "op_timeout"):
        assert hasattr(ProcessGroupHCCL.Options, field), field
    assert ProcessGroupHCCL.Options().hccl_config == {} and ProcessGroupHCCL.Options(True).is_high_priority_stream
    assert dist.is_hccl_available() and torch_npu.distributed.is_hccl_available()
    from torch_npu.distributed.distributed_c10d import is_hccl_available
    from torch_npu.distributed.run import parse_args

    assert is_hccl_available()
    args = parse_args(["--nproc-per-node", "2", "train.py", "--lr", "1"])
    assert (
        args.nproc_per_node == "2" and args.training_script == "train.py" and args.training_script_args == ["--lr", "1"]
    )


def test_bad_hccl_timeout_values_are_refused_by_name():
    from subprocess_helpers import run_python

    done = run_python(
        """
        import os, torch, torch_npu, torch.distributed as dist
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(__PORT__), HCCL_EXEC_TIMEOUT="soon")
        dist.init_process_group("hccl", rank=0, world_size=1)
    """.replace("__PORT__", str(free_port())),
        check=False,
    )
    assert done.returncode != 0
    assert (
        "Invalid value 'soon' of environment variable HCCL_EXEC_TIMEOUT: expected a positive integer number of "
        "seconds"
    ) in done.stderr and "ERR02003 DIST invalid value" in done.stderr


def test_matmul_collective_operators_need_a_process_group():
    x = torch.ones(2, 3, device="npu")
    w = torch.ones(3, 4, device="npu")
    with pytest.raises(RuntimeError, match="^npu_mm_all_reduce_base: hcom 'hccl_0': the default process group"):
        torch_npu.npu_mm_all_reduce_base(x, w, "hccl_0")
    with pytest.raises(RuntimeError, match=r"^npu_mm_reduce_scatter_base: k of x1 \(3\) and x2 \(2\) must be equal"):
        torch_npu.npu_mm_reduce_scatter_base(x, torch.ones(2, 4, device="npu"), "hccl_0", 2)
    with pytest.raises(RuntimeError, match="^npu_mm_all_reduce_base: comm_quant_scale_1 is not supported by vnpu"):
        torch_npu.npu_mm_all_reduce_base(x, w, "hccl_0", comm_quant_scale_1=torch.ones(4, device="npu"))


def test_all_to_all_vc_refuses_host_tensors_as_torch_npu_does():
    from torch_npu.distributed import all_to_all_vc

    with pytest.warns(UserWarning, match="Support for Tensors is limited to those of type npu"):
        assert all_to_all_vc(torch.empty(2), torch.empty(2), [[2]]) is None


@pytest.mark.parametrize(
    "env, network",
    [
        ({}, False),
        ({"HCCL_INTRA_ROCE_ENABLE": "1"}, True),
        ({"HCCL_INTRA_PCIE_ENABLE": "1"}, False),
        ({"HCCL_INTRA_PCIE_ENABLE": "0", "HCCL_INTRA_ROCE_ENABLE": "1"}, True),
    ],
)
def test_the_intra_host_link_follows_hccl_intra_pcie_and_roce_switches(monkeypatch, env, network):
    from torch_npu.distributed import intra_host_link

    for name in ("HCCL_INTRA_PCIE_ENABLE", "HCCL_INTRA_ROCE_ENABLE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert intra_host_link._network_inside_host() is network


def test_a_switch_that_is_not_0_or_1_is_refused_by_name(monkeypatch):
    from torch_npu.distributed import intra_host_link

    monkeypatch.setenv("HCCL_INTRA_ROCE_ENABLE", "yes")
    with pytest.raises(ValueError, match="Invalid value 'yes' of environment variable HCCL_INTRA_ROCE_ENABLE"):
        intra_host_link._network_inside_host()


def _lone_backend(size, rank=0):
    """An hccl backend object claiming `rank` of `size` ranks (its gloo transport has only this process)."""
    store = dist.HashStore()
    transport = dist.ProcessGroupGloo(store, 0, 1, datetime.timedelta(seconds=5))
    return torch_npu._C._distributed_c10d.ProcessGroupHCCL(transport, rank, size), store


def test_a_segment_that_cannot_be_opened_is_a_clear_error():
    backend, _ = _lone_backend(2)
    name = f"/vnpu_test_missing_{os.getpid()}"
    with pytest.raises(RuntimeError, match=f"shm_open\\({name}\\): No such file or directory"):
        backend._open_intra_host_link(name, False)
    owner, _ = _lone_backend(2)
    owner._open_intra_host_link(name, True)
    other_group, _ = _lone_backend(4)
    with pytest.raises(RuntimeError, match=f"shared memory segment {name} has an unexpected size"):
        other_group._open_intra_host_link(name, False)
    owner._close_intra_host_link()  # rank 0 of the group removes the name with its link
    assert not os.path.exists(f"/dev/shm{name}")


@pytest.mark.parametrize("published", ["", "/vnpu_test_never_created"], ids=["rank 0 failed", "unopenable"])
def test_a_rank_that_cannot_map_the_segment_keeps_the_whole_group_on_the_transport(monkeypatch, published):
    from torch_npu.distributed import intra_host_link

    backend, store = _lone_backend(2, rank=1)
    # rank 1's side of the agreement; rank 0 (not running) has published its host, the name, and its outcome
    store.set("vnpu_intra_host/host/0", intra_host_link._host_identity())
    store.set("vnpu_intra_host/name", published)
    store.set("vnpu_intra_host/opened/0", "1" if published else "0")
    for name in ("HCCL_INTRA_PCIE_ENABLE", "HCCL_INTRA_ROCE_ENABLE"):
        monkeypatch.delenv(name, raising=False)
    intra_host_link.connect_intra_host(backend, store, 1, 2)
    assert store.get("vnpu_intra_host/opened/1") == b"0"
    assert not backend._uses_intra_host_link


def test_host_collective_twins_outside_compiled_code_are_the_collectives_themselves():
    from subprocess_helpers import run_python

    done = run_python(
        """
        import os, torch, torch_npu, torch.distributed as dist
        from torch_npu._inductor.host_collectives import COLLECTIVES, NAMESPACE, host_twin, route_collectives_through_npu
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(__PORT__))
        dist.init_process_group("hccl", rank=0, world_size=1)
        gm = torch.fx.symbolic_trace(lambda x: x + 1)
        print("routed", route_collectives_through_npu(gm))  # no collective: the graph stays as it is
        twin = host_twin(torch.ops._c10d_functional.all_reduce.default)
        assert host_twin(torch.ops._c10d_functional.wait_tensor.default) is None and host_twin(torch.add) is None
        originals = [getattr(torch.ops._c10d_functional, name).default for name in COLLECTIVES]
        print(all(str(host_twin(op)._schema) == str(op._schema).replace("_c10d_functional::", NAMESPACE + "::")
                  for op in originals))
        out = torch.ops._c10d_functional.wait_tensor(twin(torch.ones(2, device="npu"), "sum", "0"))
        print(out.device, out.tolist())
        try:
            twin(torch.ones(2), "sum", "0")  # a CPU tensor outside host-compiled code: the group has no CPU backend
        except RuntimeError as err:
            print(str(err).splitlines()[0])
        try:
            torch_npu._C._npu_alias_of_host(torch.ones(2, device="npu"), 0)
        except RuntimeError as err:
            print(str(err).splitlines()[0])
        dist.destroy_process_group()
    """.replace("__PORT__", str(free_port())),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines == [
        "routed False",
        "True",
        "npu:0 [1.0, 1.0]",
        "No backend type associated with device type cpu",
        "expected a CPU tensor, got one on npu:0",
    ], done.stdout


def test_ddp_collects_its_runtime_stats_on_npu_without_the_unsupported_device_warning():
    # torch_npu registers an npu timer with c10d's TimerRegistry; without one DDP warns on every logged iteration
    # and its logging data has no timings.
    from subprocess_helpers import run_python

    done = run_python(
        """
        import os, torch, torch_npu, torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(__PORT__))
        dist.init_process_group("hccl", rank=0, world_size=1)
        ddp = DDP(torch.nn.Linear(8, 4).npu())
        for _ in range(3):
            ddp(torch.randn(16, 8).npu()).sum().backward()
        data = ddp._get_ddp_logging_data()
        print("timings", data["avg_forward_compute_time"] > 0, data["avg_backward_compute_time"] > 0,
              data["avg_backward_comm_time"] > 0)
        dist.destroy_process_group()
    """.replace("__PORT__", str(free_port())),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "timings True True True" in done.stdout
    assert "Time stats are currently only collected" not in done.stderr
