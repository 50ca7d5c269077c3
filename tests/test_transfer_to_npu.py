"""torch_npu.contrib.transfer_to_npu and `vnpu run` (each in a fresh process: the patches are global)."""

import json
import os
import sys

from subprocess_helpers import VNPU, last_line, run, run_python

PROJECT = os.path.join(os.path.dirname(__file__), "fixtures", "cuda_project")


def test_cuda_apis_and_device_arguments_mean_the_npu():
    out = run_python("""
        import json, torch
        import torch_npu.contrib.transfer_to_npu  # noqa: F401
        from torch_npu.contrib.transfer_to_npu import patched_calls
        x = torch.zeros(2, device="cuda:0"); y = torch.ones(2).cuda(); m = torch.nn.Linear(2, 2).cuda()
        z = x.to("cuda"); w = torch.randn(2).to(0); v = x.new_zeros(3, device=torch.device("cuda"))
        g = torch.Generator(device="cuda"); g.manual_seed(3)
        r = torch.rand(2, generator=g, device="cuda")
        with torch.autocast("cuda", dtype=torch.float16):
            h = m(y)
        s = torch.cuda.Stream()
        print(json.dumps({
            "devices": [str(t.device) for t in (x, y, z, w, v, r, m.weight)],
            "is_cuda": y.is_cuda, "autocast": str(h.dtype), "available": torch.cuda.is_available(),
            "count": torch.cuda.device_count(), "stream": type(s).__module__,
            "generator": [isinstance(g, torch.Generator), str(g.device)],
            "scaler": type(torch.cuda.amp.GradScaler()).__module__,
            "calls": patched_calls()}))
    """)
    got = json.loads(last_line(out))
    assert set(got["devices"]) == {"npu:0"}
    assert got["is_cuda"] and got["autocast"] == "torch.float16" and got["available"] and got["count"] >= 1
    assert got["stream"].startswith("torch_npu") and got["scaler"].startswith("torch_npu")
    assert got["generator"] == [True, "npu:0"]
    for api in (
        "torch.zeros",
        "Tensor.cuda",
        "Module.cuda",
        "Tensor.to",
        "Tensor.new_zeros",
        "torch.Generator",
        "torch.autocast",
        "torch.cuda.is_available",
        "torch.cuda.device_count",
    ):
        assert got["calls"].get(api, 0) >= 1, api


def test_storages_device_contexts_events_and_distributed_aliases():
    out = run_python("""
        import torch, torch.distributed as dist
        import torch_npu.contrib.transfer_to_npu  # noqa: F401
        with torch.device("cuda"):
            x = torch.ones(2)
        e = torch.Event(device="cuda")
        s = torch.UntypedStorage(8, device="cuda")
        print(x.device, e.device, isinstance(e, torch.Event), s.device, torch._utils._get_available_device_type(),
              dist.is_nccl_available(), dist.ProcessGroupNCCL.__name__, "cuda" in dist.Backend.default_device_backend_map,
              torch.cuda.memory._snapshot is torch.npu.memory._snapshot)
    """)
    assert last_line(out) == "npu:0 npu True npu:0 npu True ProcessGroupHCCL False True"


def test_host_empty_cache_is_bound_in_torch_c_as_on_cuda():
    out = run_python("""
        import torch, torch_npu
        assert not hasattr(torch._C, "_host_emptyCache")
        import torch_npu.contrib.transfer_to_npu  # noqa: F401
        pinned = torch.ones(4).pin_memory(); del pinned
        before = torch.npu.host_memory_stats()["reserved_bytes.current"]
        print(torch._C._host_emptyCache is torch_npu._C._npu_hostEmptyCache, before > 0, torch._C._host_emptyCache(),
              torch.npu.host_memory_stats()["reserved_bytes.current"])
        for args, kwargs in (((0,), {}), ((), {"device": "npu"})):
            try:
                torch._C._host_emptyCache(*args, **kwargs)
            except TypeError:
                print("TypeError")
    """)
    assert out.stdout.strip().splitlines()[-3:] == ["True True None 0", "TypeError", "TypeError"]


def test_the_known_regressions_are_absent(tmp_path):
    script = tmp_path / "scripted.py"  # TorchScript compiles from source files
    script.write_text(
        "import torch\n"
        "import torch_npu.contrib.transfer_to_npu  # noqa: F401\n"
        "@torch.jit.script\n"
        "def f(x: torch.Tensor) -> torch.Tensor:\n"
        "    return x * 2 + 1\n"
        "print(type(f).__name__, torch.version.cuda, torch.backends.cudnn.is_available(),\n"
        "      float(f(torch.ones(1, device='cuda')).cpu()))\n"
    )
    done = run([sys.executable, str(script)], dict(os.environ, VNPU_OPS_PROFILE="none"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "ScriptFunction None False 3.0"


def test_nccl_becomes_hccl_and_the_profiler_activity_cuda_profiles_the_npu():
    out = run_python("""
        import torch, torch.distributed as dist
        import torch_npu.contrib.transfer_to_npu  # noqa: F401
        seen = {}
        try:
            dist.init_process_group(backend="nccl", init_method="tcp://127.0.0.1:1", rank=0, world_size=1,
                                    timeout=__import__("datetime").timedelta(seconds=1))
        except Exception as err:
            seen["error"] = str(err)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                torch.profiler.ProfilerActivity.CUDA]) as prof:
            torch.ones(4, device="cuda").sum()
        from torch_npu.contrib.transfer_to_npu import patched_calls
        print(patched_calls().get("torch.distributed.init_process_group"), patched_calls()["ProfilerActivity.CUDA"],
              "nccl" in seen.get("error", ""))
    """)
    assert last_line(out) == "1 1 False"


def test_environment_variable_imports_it():
    out = run_python("import torch, torch_npu; print(torch.ones(1).cuda().device)", env={"TORCH_TRANSFER_TO_NPU": "1"})
    assert last_line(out) == "npu:0"


def _script(tmp_path, body):
    path = tmp_path / "prog.py"
    path.write_text(body)
    return str(path)


def test_vnpu_run_reports_devices_operators_patches_and_keeps_the_exit_status(tmp_path):
    script = _script(
        tmp_path,
        "import sys, torch\nx = torch.ones(1000, device='cuda')\ny = (x * 2).sum()\n"
        "print('result', float(y))\nsys.exit(int(sys.argv[1]))\n",
    )
    report = tmp_path / "report.json"
    done = run(VNPU + ["run", "--report", str(report), script, "7"], dict(os.environ, VNPU_OPS_PROFILE="none"))
    assert done.returncode == 7 and "result 2000.0" in done.stdout
    data = json.loads(report.read_text())
    assert data["exit_status"] == 7 and data["devices"][0]["device"] == "npu:0"
    assert data["devices"][0]["peak_allocated_bytes"] >= 4000 and data["devices"][0]["capacity_bytes"] > 2**30
    ops = {o["operator"]: o["calls"] for o in data["operators"]}
    assert ops.get("aten::mul.Tensor") == 1 and ops.get("aten::sum") == 1
    assert data["patched_cuda_calls"] == {"torch.ones": 1}
    assert data["cpu_fallback"] is None  # no profile: unknown, and the Markdown report says how to get one
    md = tmp_path / "report.md"
    run(VNPU + ["run", "--report", str(md), script, "0"], dict(os.environ, VNPU_OPS_PROFILE="none"))
    assert "vnpu ops sync" in md.read_text() and "| npu:0 |" in md.read_text()
    page = tmp_path / "report.html"
    run(VNPU + ["run", "--report", str(page), script, "0"], dict(os.environ, VNPU_OPS_PROFILE="none"))
    assert page.read_text().startswith("<!DOCTYPE html>") and "<td>npu:0</td>" in page.read_text()
    assert f"<title>Ascend readiness report: {script}</title>" in page.read_text()
    failing = _script(tmp_path, "raise ValueError('boom')\n")
    crashed = run(VNPU + ["run", failing], dict(os.environ, VNPU_OPS_PROFILE="none"))
    assert crashed.returncode == 1 and "ValueError: boom" in crashed.stderr
    assert run(VNPU + ["run", str(tmp_path / "missing.py")], dict(os.environ)).returncode == 2


def test_vnpu_run_lists_cpu_fallbacks_with_their_lines(synced, tmp_path):
    script = _script(
        tmp_path,
        "import torch\nx = torch.randn(8, device='cuda')\nfor _ in range(3):\n" "    y = torch.fmax(x, x)\nz = x + 1\n",
    )
    report = tmp_path / "report.json"
    done = run(VNPU + ["run", "--report", str(report), script], synced)
    assert done.returncode == 0, done.stderr
    data = json.loads(report.read_text())
    assert data["cpu_fallback"] == [
        {"operator": "aten::fmax.out", "calls": 3, "sites": [{"line": f"{script}:4", "calls": 3}]}  # as on the card
    ]
    assert data["torch_npu_profile"] is not None
    assert any("will fall back to run on the CPU" in w["warning"] for w in data["warnings"])


def test_vnpu_run_runs_the_fixture_training_loop(tmp_path):
    done = run(VNPU + ["run", "train.py"], dict(os.environ, VNPU_OPS_PROFILE="none"), cwd=PROJECT)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout.strip().splitlines()[-1])["losses"]) == 5
    assert sys.executable


def test_only_device_arguments_are_rewritten_never_strings_that_contain_cuda(tmp_path):
    out = run_python(f"""
        import json, os, torch
        import torch_npu.contrib.transfer_to_npu  # noqa: F401
        from torch_npu.contrib._device_arguments import _hccl_backend
        from torch_npu.contrib.transfer_to_npu import patched_calls
        folder = {str(tmp_path)!r}
        path = os.path.join(folder, "cuda_weights.pt")
        torch.save({{"cuda_layer.weight": torch.ones(2, device="cuda"), "note": "trained on cuda:0"}}, path)
        forms = {{}}
        for name, location in (("string", "cuda"), ("indexed", "cuda:0"), ("device", torch.device("cuda", 0)),
                               ("dict", {{"cuda:0": "cuda:0"}}), ("cpu", "cpu")):
            loaded = torch.load(path, map_location=location)
            forms[name] = [sorted(loaded), loaded["note"], str(loaded["cuda_layer.weight"].device)]
        data = torch.arange(3, dtype=torch.float32).numpy().tofile(os.path.join(folder, "cuda_data.bin"))
        from_file = torch.from_file(os.path.join(folder, "cuda_data.bin"), size=3, dtype=torch.float32)
        print(json.dumps({{"forms": forms, "from_file": from_file.tolist(),
                          "message": torch.tensor([1.0], device="cuda").new_tensor([2.0]).device.type,
                          "backends": [_hccl_backend(b) for b in ("nccl", "cpu:gloo,cuda:nccl", "gloo", "cudax")],
                          "load_calls": patched_calls().get("torch.load", 0)}}))
    """)
    got = json.loads(last_line(out))
    keys = ["cuda_layer.weight", "note"]
    assert got["forms"] == {
        "string": [keys, "trained on cuda:0", "npu:0"],
        "indexed": [keys, "trained on cuda:0", "npu:0"],
        "device": [keys, "trained on cuda:0", "npu:0"],
        "dict": [keys, "trained on cuda:0", "npu:0"],
        "cpu": [keys, "trained on cuda:0", "cpu"],
    }
    assert got["from_file"] == [0.0, 1.0, 2.0] and got["message"] == "npu"
    assert got["backends"] == ["hccl", "cpu:gloo,npu:hccl", "gloo", "cudax"]
    assert got["load_calls"] == 4  # the four cuda forms; the cpu one is untouched


def test_distributed_profiler_generator_and_extension_details_mean_the_npu():
    out = run_python("""
        import json, torch
        import torch_npu
        import torch_npu.contrib.transfer_to_npu as transfer
        from torch.autograd import profiler_util
        seen = {}
        fake_init = transfer._wrapper_hccl(lambda backend=None, init_method=None, device_id=None: (backend, device_id))
        backend, device_id = fake_init(backend="cuda:nccl", device_id=torch.device("cuda:0"))
        torch.cuda.init()
        print(json.dumps({
            "backend": backend, "device_id": str(device_id),
            "kernel": profiler_util.Kernel("gemm", "cuda", 5).device,
            "include": torch.utils.cpp_extension.include_paths("cuda")[-1].endswith("torch_npu/csrc"),
            "generators": torch.cuda.default_generators is torch_npu.npu.default_generators,
            "n_generators": len(torch.cuda.default_generators),
        }))
    """)
    got = json.loads(last_line(out))
    assert got == {
        "backend": "npu:hccl",
        "device_id": "npu:0",
        "kernel": "npu",
        "include": True,
        "generators": True,
        "n_generators": 8,
    }


def test_torch_npus_transfer_helpers(tmp_path):
    config = tmp_path / "apis_config.json"
    config.write_text('{"transformers": {"version": "4.0", "apis": {}}}')
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "link.json").symlink_to(config)
    out = run_python(f"""
        import json, logging, torch
        import torch_npu.contrib.transfer_to_npu as transfer
        root = {str(tmp_path)!r}
        probe = transfer._wrapper_libraries_func(lambda: torch.cuda.is_available())
        profile = transfer._wrapper_profiler(lambda **kwargs: sorted(kwargs))
        transfer._del_nccl_device_backend_map()
        print(json.dumps({{
            "valid": [transfer._check_input_file_valid(f"{{root}}/{{n}}") for n in ("apis_config.json", "link.json", "none.json")],
            "loaded": [transfer._load_json_file(f"{{root}}/{{n}}") for n in ("apis_config.json", "list.json", "none.json")],
            "dict": transfer._replace_cuda_to_npu_in_dict({{"cuda:1": "cuda", "cuda_weights": 1}}),
            "to": str(transfer._wrapper_cuda(torch.Tensor.to)(torch.ones(1), "cuda:0").device),
            "libraries_see_cuda": [probe(), torch.cuda.is_available()],
            "profile": profile(experimental_config=object(), record_shapes=True),
            "nccl_default": "cuda" in torch.distributed.Backend.default_device_backend_map,
        }}))
    """)
    got = json.loads(last_line(out))
    assert got["valid"] == [True, False, False]
    assert got["loaded"] == [{"transformers": {"version": "4.0", "apis": {}}}, {}, {}]
    assert got["dict"] == {"npu:1": "npu", "npu_weights": 1}
    assert got["to"] == "npu:0"
    assert got["libraries_see_cuda"] == [False, True]
    assert got["profile"] == ["record_shapes"]
    assert got["nccl_default"] is False


def test_transfer_helpers_behave_as_torch_npus_own_tests_expect():
    out = run_python("""
        import json, logging, torch
        from unittest.mock import patch
        import torch_npu
        import torch_npu.contrib.transfer_to_npu as transfer
        generic = transfer._wrapper_hccl(lambda *args, **kwargs: (args, kwargs))
        args, kwargs = generic("nccl", "cpu", backend="cuda:nccl", device="gpu")
        with patch("torch_npu.contrib.transfer_to_npu._check_input_file_valid", return_value=True), \\
                patch("json.load", return_value={"key": 1}), patch("builtins.open"):
            loaded = transfer._load_json_file("anywhere.json")
        with patch("logging.warning") as warned:
            kept = transfer._wrapper_profiler(lambda **kw: sorted(kw))(experimental_config="cuda's", x=1)
        print(json.dumps({
            "args": list(args), "backend": kwargs["backend"], "device": kwargs["device"], "loaded": loaded,
            "warned": warned.call_count, "kept": kept,
            "amp_common": torch.cuda.amp.common is torch_npu.npu.amp.common,
            "dict": transfer._replace_cuda_to_npu_in_dict({"cuda_version": "cuda:0", 3: "x"}),
        }))
    """)
    got = json.loads(last_line(out))
    assert got == {
        "args": ["hccl", "cpu"],
        "backend": "npu:hccl",
        "device": "gpu",
        "loaded": {"key": 1},
        "warned": 1,
        "kept": ["x"],
        "amp_common": True,
        "dict": {"npu_version": "npu:0", "3": "x"},
    }
