"""npu-smi: the device table and the vnpu processes holding npu memory, read from the shared registry."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from vnpu import npu_smi

HOLDER = textwrap.dedent(
    """
    import sys, torch, torch_npu
    x = torch.empty({mb} * 2**20, dtype=torch.uint8, device="{device}")
    print("ready", flush=True)
    sys.stdin.readline()
    """
)


def _holder(device, mb, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VNPU_", "ASCEND_RT_"))}
    env.update(extra)
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER.format(device=device, mb=mb)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _release(proc):
    proc.stdin.write("\n")
    proc.stdin.flush()
    assert proc.wait(timeout=60) == 0


def _process_rows(text):
    """(npu, pid, name, MB) of each process row of `npu-smi info`."""
    rows = []
    table = text.split("Process memory(MB)")[1]
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 4 and cells[1].isdigit():
            rows.append((int(cells[0].split()[0]), int(cells[1]), cells[2], int(cells[3])))
    return rows


def _info(capsys, *args):
    assert npu_smi.main(["info", *args]) == 0
    return capsys.readouterr().out


def test_info_lists_each_process_with_its_device_and_memory_until_it_exits(capsys):
    first, second = _holder("npu:0", 96), _holder("npu:3", 300)
    try:
        text = _info(capsys)
        rows = _process_rows(text)
        mine = {pid: (npu, mb) for npu, pid, _, mb in rows if pid in (first.pid, second.pid)}
        assert mine[first.pid][0] == 0 and 96 <= mine[first.pid][1] < 100
        assert mine[second.pid][0] == 3 and 300 <= mine[second.pid][1] < 304
        assert all(len(line) == 98 for line in text.splitlines())
    finally:
        _release(first)
        _release(second)
    pids = {pid for _, pid, _, _ in _process_rows(_info(capsys))}
    assert first.pid not in pids and second.pid not in pids
    assert not os.path.exists(f"/dev/shm/vnpu-smi.{first.pid}")


BUSY = textwrap.dedent(
    """
    import sys, threading, torch, torch_npu
    a = torch.randn(512, 512, device="npu:14")
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), done.set()), daemon=True).start()
    print("ready", flush=True)
    while not done.is_set():
        a @ a
    """
)


def test_aicore_usage_is_the_share_of_samples_a_device_runs_an_operator(capsys, monkeypatch):
    # Devices 14 and 15 of a 16-device machine: no other test's processes use them.
    monkeypatch.setenv("VNPU_DEVICE_COUNT", "16")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VNPU_", "ASCEND_RT_"))}
    busy = subprocess.Popen(
        [sys.executable, "-c", BUSY],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=dict(env, VNPU_DEVICE_COUNT="16"),
        text=True,
    )
    idle = _holder("npu:15", 8, VNPU_DEVICE_COUNT="16")
    try:
        assert busy.stdout.readline().strip() == "ready"
        entries = npu_smi.read_registry()
        usage = {d["id"]: d["aicore"] for d in npu_smi.devices(entries, npu_smi.sample_usage(entries))}
        assert usage[14] >= 50, usage  # matmuls back to back: busy nearly all the time
        assert usage[15] == 0, usage  # holds memory, runs nothing
        text = _info(capsys, "-t", "usages", "-i", "15")
        assert "        Aicore Usage Rate(%)           : 0\n" in text
    finally:
        _release(busy)
        _release(idle)


def test_a_killed_process_is_removed_from_the_registry(capsys):
    proc = _holder("npu:2", 8)
    entry = f"/dev/shm/vnpu-smi.{proc.pid}"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert os.path.exists(entry)  # nothing ran at exit
    assert proc.pid not in {pid for _, pid, _, _ in _process_rows(_info(capsys))}
    assert not os.path.exists(entry)


def test_physical_device_ids_follow_ascend_rt_visible_devices(capsys):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VNPU_", "ASCEND_RT_"))}
    env["ASCEND_RT_VISIBLE_DEVICES"] = "5"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER.format(device="npu:0", mb=16)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        rows = _process_rows(_info(capsys))
        assert [npu for npu, pid, _, _ in rows if pid == proc.pid] == [5]
    finally:
        _release(proc)


def test_usages_memory_board_and_list_views(capsys):
    proc = _holder("npu:1", 64)
    try:
        usages = _info(capsys, "-t", "usages", "-i", "1")
    finally:
        _release(proc)
    fields = dict(line.strip().split(" : ") if " : " in line else (line, "") for line in usages.splitlines())
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    assert fields["HBM Capacity(MB)"] == "65536"
    assert 0 <= int(fields["Aicore Usage Rate(%)"]) <= 100  # other processes of the machine may run on npu:1
    assert fields["Aivector Usage Rate(%)"] == "NA"
    memory = _info(capsys, "-t", "memory", "-i", "1")
    assert "HBM Capacity(MB)               : 65536" in memory
    board = _info(capsys, "-t", "board", "-i", "7")
    assert "NPU ID                         : 7" in board and "PCIe Bus Info                  : 0000:08:00.0" in board
    listing = _info(capsys, "-l")
    assert listing.splitlines()[0] == "        Total Count                    : 8"
    assert listing.count("NPU ID") == 8


def test_bad_requests(capsys):
    assert npu_smi.main(["info", "-t", "usages", "-i", "8"]) == 2
    assert capsys.readouterr().err == "Error: the NPU id 8 is invalid (this machine has NPU 0 to 7).\n"
    with pytest.raises(SystemExit) as e:
        npu_smi.main(["info", "-t", "usages"])
    assert e.value.code == 2
    assert "info -t usages needs -i <NPU id>" in capsys.readouterr().err


def test_entries_of_other_programs_and_partial_entries_are_ignored(tmp_path):
    (tmp_path / "vnpu-smi.1").write_bytes(b"short")
    (tmp_path / "vnpu-smi.2").write_bytes(b"\0" * npu_smi._ENTRY.size)  # no magic yet
    (tmp_path / "other").write_bytes(b"x")
    assert npu_smi.read_registry(str(tmp_path)) == []


def test_an_invalid_device_count_is_refused(monkeypatch):
    monkeypatch.setenv("VNPU_DEVICE_COUNT", "lots")
    with pytest.raises(SystemExit) as e:
        npu_smi.main(["info"])
    assert str(e.value) == "npu-smi: VNPU_DEVICE_COUNT='lots' is invalid: expected an integer from 0 to 64"
