"""vnpu doctor: each check finds what is wrong with an installation and says what to fix."""

import pytest

from vnpu import doctor_command


def _by_name(found):
    return {name: (status, detail, fix) for name, status, detail, fix in found}


def test_a_working_installation_passes_every_check(monkeypatch, tmp_path):
    monkeypatch.delenv("VNPU_OPS_PROFILE", raising=False)  # the shipped profile, not a developer's synced one
    monkeypatch.setenv("VNPU_CACHE_DIR", str(tmp_path))
    found = _by_name(doctor_command.results())
    for name in ("torch", "autoload", "runtime", "operator-support profile", "npu-smi registry"):
        assert found[name][0] == doctor_command.OK, (name, found[name])
    assert found["torch"][1].startswith("torch 2.13.")
    assert found["runtime"][1] == "8 x Ascend910B1, 64 GiB each"
    assert found["operator-support profile"][1].startswith("torch_npu 2.13.")


@pytest.mark.parametrize(
    "name, value, status, detail",
    [
        (
            "VNPU_DEVICE_COUNT",
            "abc",
            doctor_command.FAIL,
            "RuntimeError: No NPU device is available: VNPU_DEVICE_COUNT='abc' is invalid: "
            "expected an integer from 0 to 64 (the number of virtual NPUs)",
        ),
        (
            "ACL_OP_INIT_MODE",
            "999",
            doctor_command.WARN,
            "8 x Ascend910B1, 64 GiB each; UserWarning: Get env ACL_OP_INIT_MODE not in [0, 1, 2], "
            "so reset it to the default value 0.",
        ),
    ],
)
def test_the_runtime_check_shows_what_an_invalid_variable_causes(monkeypatch, name, value, status, detail):
    monkeypatch.setenv(name, value)
    assert doctor_command.check_runtime()[:2] == (status, detail)


def test_missing_compiler_autoload_switched_off_and_a_missing_profile(monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler-here")
    assert doctor_command.check_compiler()[:2] == (
        doctor_command.WARN,
        "no C++ compiler (no-such-compiler-here) on PATH",
    )
    monkeypatch.setenv("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    assert doctor_command.check_autoload()[0] == doctor_command.WARN
    monkeypatch.setenv("VNPU_OPS_PROFILE", "9.9.9")
    status, detail, _ = doctor_command.check_op_profile()
    assert status == doctor_command.FAIL
    assert (
        detail
        == "vnpu: VNPU_OPS_PROFILE='9.9.9': no profile for torch_npu 9.9.9 (run `vnpu ops sync --torch-npu 9.9.9`)"
    )
    monkeypatch.setenv("VNPU_OPS_PROFILE", "none")
    assert doctor_command.check_op_profile()[0] == doctor_command.WARN


def test_a_check_that_breaks_is_reported_and_fails_the_run():
    def broken():
        raise OSError("disk gone")

    assert doctor_command.results([("disk", broken)]) == [
        ("disk", doctor_command.FAIL, "OSError: disk gone", "report this")
    ]


def test_the_torch_check_names_a_wrong_version_and_a_gpu_build(monkeypatch):
    import torch

    monkeypatch.setattr(torch, "__version__", "2.12.1+cpu")
    assert doctor_command.check_torch() == (
        doctor_command.FAIL,
        "torch 2.12.1+cpu; vnpu needs torch==2.13.*",
        "pip install 'torch==2.13.*'",
    )
    monkeypatch.setattr(torch, "__version__", "2.13.0+cu126")
    monkeypatch.setattr(torch.version, "cuda", "12.6")
    assert doctor_command.check_torch() == (
        doctor_command.WARN,
        "torch 2.13.0+cu126 is a GPU build",
        "vnpu needs no GPU: pip install 'torch==2.13.*' --index-url https://download.pytorch.org/whl/cpu",
    )
