"""Operator-support profiles: built from the real torch-npu wheel on PyPI, then torch_npu's CPU-fallback
warning (once per operator), its counting, and TORCH_NPU_FALLBACK_CPU_DISABLE=1, in fresh processes."""

import json
import os
import sys

import torch
from subprocess_helpers import VNPU, run

from torch_npu import _op_support

NEEDLE = "will fall back to run on the CPU"


def test_sync_stores_the_wheel_operator_lists_and_activates_them(synced):
    active = open(os.path.join(synced["VNPU_CACHE_DIR"], "active")).read().strip()
    assert active.startswith(".".join(__import__("torch").__version__.split(".")[:2]))
    profile = json.load(open(os.path.join(synced["VNPU_CACHE_DIR"], "profiles", f"torch_npu-{active}.json")))
    kernels = set(profile["npu_kernels"])
    assert {"add.Tensor", "mm", "copy_", "_to_copy"} <= kernels and "fmax.out" not in kernels
    assert len(profile["lists"]["supported"]) > 500


def test_fallback_warns_once_per_operator_and_counts_calls(synced, tmp_path):
    """fmax runs through fmax.out on the card, so both forms count as, and warn once for, aten::fmax.out."""
    script = tmp_path / "fmax.py"
    script.write_text(
        "import torch, torch_npu\n"
        "x, y = torch.randn(4, device='npu'), torch.randn(4, device='npu')\n"
        "out = torch.empty(4, device='npu')\n"
        "torch.fmax(x, y)\n"
        "torch.fmax(x, y, out=out)\n"
        "assert torch.equal(out.cpu(), torch.fmax(x.cpu(), y.cpu()))\n"
        "print(getattr(torch_npu._op_support.ledger(), 'calls', 'no profile'))\n"
    )
    done = run([sys.executable, str(script)], synced)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count(NEEDLE) == 1
    assert (
        "CAUTION: The operator 'aten::fmax.out' is not currently supported on the NPU backend and will fall "
        "back to run on the CPU. This may have performance implications. (function npu_cpu_fallback)"
    ) in done.stderr
    assert f"{script}:4: UserWarning" in done.stderr  # the warning points at the user's line
    assert "{'aten::fmax.out': 2}" in done.stdout
    quiet = run([sys.executable, str(script)], dict(synced, VNPU_OPS_PROFILE="none"))
    assert quiet.returncode == 0 and NEEDLE not in quiet.stderr and "no profile" in quiet.stdout
    silenced = run([sys.executable, str(script)], dict(synced, TORCH_NPU_WARNING_DISABLE="1"))
    assert silenced.returncode == 0 and NEEDLE not in silenced.stderr


def test_fallback_disabled_raises_torch_npus_error(synced, tmp_path):
    script = tmp_path / "fmax.py"
    script.write_text("import torch, torch_npu\nx = torch.randn(4, device='npu')\ntorch.fmax(x, x)\n")
    done = run([sys.executable, str(script)], dict(synced, TORCH_NPU_FALLBACK_CPU_DISABLE="1"))
    assert done.returncode != 0
    assert (
        "RuntimeError: The operator 'aten::fmax.out' would execute its main computation on CPU through dispatcher "
        "backend fallback because no kernel is registered for the NPU PrivateUse1 backend, but CPU fallback is "
        "disabled by TORCH_NPU_FALLBACK_CPU_DISABLE=1."
    ) in done.stderr
    assert "ERR01007 OPS feature not supported" in done.stderr and NEEDLE not in done.stderr


def test_hot_operators_with_npu_kernels_stay_silent(synced, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import torch, torch_npu\n"
        "model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).npu()\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for _ in range(3):\n"
        "    loss = model(torch.randn(4, 8, device='npu')).sum()\n"
        "    loss.backward(); opt.step(); opt.zero_grad()\n"
        "print(torch_npu._op_support.ledger().calls)\n"
    )
    done = run([sys.executable, str(script)], synced)
    assert done.returncode == 0, done.stderr
    assert NEEDLE not in done.stderr and done.stdout.strip() == "{}"


def test_functional_and_inplace_variants_run_through_their_structured_delegate():
    # torch_npu lists gelu.out; gelu and gelu_ reach it as structured kernels, so real hardware does not fall back
    assert {"gelu", "gelu_", "gelu.out"} <= set(_op_support.with_structured_variants(["gelu.out"]))
    assert "fmax" not in _op_support.with_structured_variants(["gelu.out"])
    shipped = set(_op_support.shipped_profile()["npu_kernels"])
    for op in ("gelu", "gelu_", "cumsum_", "argmax"):
        assert op in shipped and _op_support.structured_delegates()[op] in shipped, op


def shipped_profile_env(tmp_path):
    """An environment with an empty vnpu cache: the shipped profile is the active one."""
    env = dict(os.environ, VNPU_CACHE_DIR=str(tmp_path))
    env.pop("VNPU_OPS_PROFILE", None)
    return env


def assert_silent_with_the_shipped_profile(env, program):
    """`program` (lines run after importing torch and torch_npu) warns of no fallback and counts none."""
    script = "import torch, torch_npu\n" + program + "print(torch_npu._op_support.ledger().calls)\n"
    done = run([sys.executable, "-c", script], env)
    assert done.returncode == 0 and NEEDLE not in done.stderr and done.stdout.strip() == "{}", done.stderr


def test_shipped_profile_keeps_a_gelu_model_silent(tmp_path):
    assert_silent_with_the_shipped_profile(
        shipped_profile_env(tmp_path),
        "x = torch.randn(4, 8, device='npu', requires_grad=True)\n"
        "torch.nn.functional.gelu(x).sum().backward()\n"
        "torch.nn.functional.gelu(x.detach(), approximate='tanh')\n",
    )


def test_attention_that_the_card_runs_with_its_own_kernel_does_not_warn(tmp_path):
    # torch_npu has an NPU kernel for scaled_dot_product_attention; vnpu computes it through the CPU's flash
    # kernel (bit-identical results), which the card never reaches: no fallback warning, forward or backward
    env = shipped_profile_env(tmp_path)
    assert_silent_with_the_shipped_profile(
        env,
        "layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True).npu()\n"
        "layer(torch.randn(2, 5, 16, device='npu')).sum().backward()\n"
        "q = torch.randn(1, 2, 4, 8, device='npu', requires_grad=True)\n"
        "torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()\n",
    )
    checked = run(VNPU + ["ops", "check", "_scaled_dot_product_flash_attention_for_cpu"], env)
    assert checked.returncode == 0 and "runs on the NPU" in checked.stdout, checked.stdout
    # a release without that kernel would reach the CPU's flash kernel through the fallback
    without = dict(_op_support.shipped_profile())
    without["npu_kernels"] = [k for k in without["npu_kernels"] if k != "scaled_dot_product_attention"]
    assert "_scaled_dot_product_flash_attention_for_cpu" in _op_support.fallback_operators(without)
    assert "_scaled_dot_product_flash_attention_for_cpu" not in _op_support.fallback_operators(
        _op_support.shipped_profile()
    )


def test_ops_check_and_list(synced):
    fallback = run(VNPU + ["ops", "check", "fmax.out"], synced)
    assert fallback.returncode == 1 and "falls back to the CPU" in fallback.stdout
    native = run(VNPU + ["ops", "check", "aten::add.Tensor"], synced)
    assert native.returncode == 0 and "runs on the NPU" in native.stdout
    decomposed = run(VNPU + ["ops", "check", "linear"], synced)
    assert decomposed.returncode == 0 and "decomposed" in decomposed.stdout
    assert run(VNPU + ["ops", "check", "no_such_op"], synced).returncode == 2
    listed = run(VNPU + ["ops", "list", "--fallback"], synced)
    assert listed.returncode == 0 and "fmax.out" in listed.stdout.split()


def test_without_a_profile_vnpu_says_how_to_get_one(tmp_path):
    env = dict(os.environ, VNPU_CACHE_DIR=str(tmp_path), VNPU_OPS_PROFILE="none")
    done = run(VNPU + ["ops", "list"], env)
    assert done.returncode == 1 and "vnpu ops sync" in done.stdout


def test_the_shipped_profile_is_active_without_a_sync(tmp_path):
    env = shipped_profile_env(tmp_path)  # an empty cache: nothing synced
    script = (
        "import torch, torch_npu, warnings\n"
        "from torch_npu import _op_support\n"
        "print(_op_support.active_profile()['torch_npu'])\n"
        "x = torch.randn(6, device='npu')\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    torch.special.i1(x)\n"
        "print([str(m.message)[:60] for m in w])\n"
    )
    done = run([sys.executable, "-c", script], env)
    version, warned = done.stdout.strip().splitlines()[-2:]
    assert version.startswith(torch.__version__.split("+")[0].rsplit(".", 1)[0] + ".")
    # special_i1 runs through its out= variant on the card, which is the operator that falls back
    assert "CAUTION: The operator 'aten::special_i1.out' is not currentl" in warned, done.stdout + done.stderr
    refused = run([sys.executable, "-c", script], dict(env, TORCH_NPU_FALLBACK_CPU_DISABLE="1"))
    assert refused.returncode != 0 and "CPU fallback is disabled by TORCH_NPU_FALLBACK_CPU_DISABLE=1" in refused.stderr


def test_bad_profile_settings_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    env = dict(os.environ, VNPU_OPS_PROFILE=str(bad))
    done = run([sys.executable, "-c", "import torch, torch_npu"], env)
    assert done.returncode != 0 and f"cannot read the operator-support profile {bad}" in done.stderr
    missing = run(
        [sys.executable, "-c", "import torch, torch_npu"],
        dict(os.environ, VNPU_OPS_PROFILE="9.9.9", VNPU_CACHE_DIR=str(tmp_path)),
    )
    assert missing.returncode != 0 and "vnpu ops sync --torch-npu 9.9.9" in missing.stderr


def test_wheel_yaml_entries_of_every_form_are_read():
    codegen = (
        "supported:\n- abs\n- func: add.Tensor\n  op_api: true\n"
        "symint:\n- func: embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1) -> Tensor\n"
        "autograd:\n- func: _thnn_fused_gru_cell(Tensor a) -> (Tensor, Tensor)\n"
    )
    lists = _op_support.parse_wheel_lists(codegen, "supported:\n  - empty.memory_format\n")
    assert lists["supported"] == ["abs", "add.Tensor"] and lists["symint"] == ["embedding"]
    assert lists["autograd"] == ["_thnn_fused_gru_cell"] and lists["base"] == ["empty.memory_format"]
    assert lists["quant"] == []


def test_a_json_file_that_is_not_a_profile_is_refused_by_name(tmp_path):
    other = tmp_path / "other.json"
    other.write_text('{"something": 1}')
    done = run([sys.executable, "-c", "import torch, torch_npu"], dict(os.environ, VNPU_OPS_PROFILE=str(other)))
    assert done.returncode != 0
    assert f"RuntimeError: vnpu: {other} is not an operator-support profile (no npu_kernels list)" in done.stderr


def test_custom_operators_are_read_from_op_plugins_documentation():
    docs = (
        '_add_torch_npu_docstr(\n    "npu_rms_norm",\n    """..."""\n)\n_add_torch_npu_docstr("npu_silu", """...""")\n'
    )
    assert _op_support.custom_operators_from_docs(docs) == ["npu_rms_norm", "npu_silu"]


def test_ops_list_custom_shows_each_custom_operator_and_its_state(tmp_path):
    env = dict(os.environ, VNPU_CACHE_DIR=str(tmp_path))  # the shipped profile
    env.pop("VNPU_OPS_PROFILE", None)
    done = run(VNPU + ["ops", "list", "--custom"], env)
    assert done.returncode == 0, done.stdout + done.stderr
    states = dict(line.split() for line in done.stdout.strip().splitlines()[:-1])
    assert states["npu_rms_norm"] == "computed" and states["npu_max"] == "computed"
    assert states["ffn_worker_scheduler"] == "card-only" and states["obfuscation_initialize"] == "card-only"
    assert set(states.values()) == {"computed", "card-only"}  # (every documented custom operator exists)
    assert states["_lstm_npu"] == "computed" and states["_lstm_npu_backward"] == "computed"
    total = done.stdout.strip().splitlines()[-1]
    computed = sum(v == "computed" for v in states.values())
    card_only = sum(v == "card-only" for v in states.values())
    missing = len(states) - computed - card_only
    assert total == (
        f"torch_npu 2.13.0: {len(states)} custom operators, {computed} computed on vnpu, {card_only} card-only, "
        f"{missing} missing"
    )
