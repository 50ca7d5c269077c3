"""prof_common_func._cann_package_manager: torch_npu's probe of `msprof --help` (run for real against msprof
programs on PATH), and vnpu's own answers for its exporter, which CannPackageManager starts from."""

import os

import pytest

from torch_npu.profiler.analysis.prof_common_func import _cann_package_manager as cann


def _msprof(tmp_path, monkeypatch, body, mode=0o755):
    tool = tmp_path / "msprof"
    tool.write_text("#!/bin/sh\n" + body + "\n")
    os.chmod(tool, mode)
    monkeypatch.setenv("PATH", str(tmp_path))
    return tool


def test_a_msprof_that_lists_type_exports_a_database(tmp_path, monkeypatch):
    _msprof(
        tmp_path,
        monkeypatch,
        'echo "  --type <type>  text or db; default text: text(which will also export the database)"',
    )
    assert cann.check_cann_package_support_export_db()
    assert cann.check_cann_package_support_default_export_db()
    assert not cann.check_msprof_help_output("--no-such-option")


def test_a_failing_missing_or_unsafe_msprof_supports_nothing(tmp_path, monkeypatch):
    _msprof(tmp_path, monkeypatch, 'echo "--type"; exit 1')
    assert not cann.check_cann_package_support_export_db()
    _msprof(tmp_path, monkeypatch, 'echo "--type"', mode=0o777)  # writable by anyone: not run
    assert not cann.check_cann_package_support_export_db()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert not cann.check_cann_package_support_export_db()


def test_the_manager_answers_for_vnpus_exporter_and_asks_msprof_when_unset(tmp_path, monkeypatch):
    manager = cann.CannPackageManager
    assert manager.is_support_export_db() is True and manager.is_support_default_export_db() is False
    _msprof(tmp_path, monkeypatch, 'echo "--type"')
    monkeypatch.setattr(manager, "SUPPORT_EXPORT_DB", None)
    monkeypatch.setattr(manager, "SUPPORT_DEFAULT_EXPORT_DB", None)
    assert manager.is_support_export_db() is True and manager.is_support_default_export_db() is False
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # answers are kept once asked
    assert manager.SUPPORT_EXPORT_DB is True and manager.is_support_export_db() is True


@pytest.mark.parametrize("body", ["kill -9 $$", "exec /nonexistent"])
def test_a_crashing_msprof_is_not_an_error(tmp_path, monkeypatch, body):
    _msprof(tmp_path, monkeypatch, body)
    assert cann.check_msprof_help_output("--type") is False
