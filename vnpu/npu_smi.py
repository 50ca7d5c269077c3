"""``npu-smi``: the virtual NPUs of this machine and the vnpu processes holding their memory.

Every vnpu process that reserves npu memory publishes an entry in /dev/shm/vnpu-smi.<pid>
(torch_npu/csrc/runtime/ProcessRegistry.h: its name, SoC, device capacity, the bytes it has reserved
on each physical device and whether each device is running one of its operators right now). The entry
goes away when the process exits; entries of processes that were killed are removed here.

AI Core usage is sampled: the busy flags of every process are read every millisecond for 0.2 s, and a
device's usage is the share of samples in which some process was running an operator on it (copies
between host and device are DMA on a card and do not count). Power and temperature are not measured on
vnpu and show NA.

    npu-smi info                     the device table and the process table
    npu-smi info -l                  the devices, one block each
    npu-smi info -t board -i N       board information of NPU N
    npu-smi info -t usages -i N      memory and HBM usage of NPU N
    npu-smi info -t memory -i N      HBM capacity of NPU N
"""

import argparse
import mmap
import os
import struct
import sys
import time

from vnpu._version import __version__

REGISTRY_DIR = "/dev/shm"
PREFIX = "vnpu-smi."
_ENTRY = struct.Struct("<8sqq64s32sq64q64B")  # RegistryEntry
_BUSY = struct.Struct("<64B")  # its busy flags, the last field
_MAGIC = b"VNPUSMI2"
_SAMPLES, _SAMPLE_SECONDS = 200, 0.001
_MB = 1024 * 1024
_DEFAULT_SOC = "Ascend910B1"
_TYPES = ("board", "usages", "memory")


def _start_time(pid):
    """Clock ticks since boot at which pid started (field 22 of /proc/<pid>/stat), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[19])


def read_registry(directory=REGISTRY_DIR):
    """The live vnpu processes' entries; entries of processes that no longer run are removed."""
    entries = []
    try:
        names = sorted(n for n in os.listdir(directory) if n.startswith(PREFIX))
    except OSError:
        return entries
    for name in names:
        path = os.path.join(directory, name)
        try:
            with open(path, "rb") as f:
                data = f.read(_ENTRY.size)
        except OSError:
            continue
        if len(data) < _ENTRY.size:
            continue
        magic, pid, start, proc_name, soc, capacity, *rest = _ENTRY.unpack(data)
        reserved = rest[:64]
        if magic != _MAGIC:
            continue  # an entry being written
        if _start_time(pid) != start:  # exited without removing it (killed), or the pid is reused
            try:
                os.unlink(path)
            except OSError:
                pass
            continue
        entries.append(
            {
                "pid": pid,
                "name": proc_name.split(b"\0", 1)[0].decode(errors="replace"),
                "soc": soc.split(b"\0", 1)[0].decode(errors="replace"),
                "capacity": capacity,
                "reserved": reserved,
                "path": path,
            }
        )
    return entries


def sample_usage(entries, samples=_SAMPLES, interval=_SAMPLE_SECONDS):
    """AI Core usage (%) of each physical device: the share of `samples` reads, `interval` seconds
    apart, in which some process's busy flag for it was set."""
    busy = [0] * 64
    maps = []
    try:
        for e in entries:
            try:
                with open(e["path"], "rb") as f:
                    maps.append(mmap.mmap(f.fileno(), _ENTRY.size, prot=mmap.PROT_READ))
            except (OSError, ValueError):
                continue  # the process exited meanwhile
        if not maps:
            return busy
        offset = _ENTRY.size - _BUSY.size
        for _ in range(samples):
            now = [0] * 64
            for m in maps:
                for device, flag in enumerate(_BUSY.unpack_from(m, offset)):
                    now[device] |= flag
            busy = [b + n for b, n in zip(busy, now)]
            time.sleep(interval)
    finally:
        for m in maps:
            m.close()
    return [round(100 * b / samples) for b in busy]


def _device_count():
    value = os.environ.get("VNPU_DEVICE_COUNT", "8")
    try:
        count = int(value)
    except ValueError:
        count = -1
    if not 0 <= count <= 64:
        raise SystemExit(f"npu-smi: VNPU_DEVICE_COUNT='{value}' is invalid: expected an integer from 0 to 64")
    return count


def _machine_soc():
    """The SoC and capacity this machine's devices model (a running process's, else this environment's)."""
    import torch

    import torch_npu  # noqa: F401

    props = torch.npu.get_device_properties(0)
    return props.name, props.total_memory


def devices(entries, usage=None):
    """One record per physical device: name, capacity, HBM in use, AI Core usage (%) and the processes
    using it."""
    count = _device_count()
    if entries:
        soc, capacity = entries[0]["soc"], entries[0]["capacity"]
    elif count:
        soc, capacity = _machine_soc()
    else:
        soc, capacity = _DEFAULT_SOC, 0
    table = []
    for index in range(count):
        procs = [(e["pid"], e["name"], e["reserved"][index]) for e in entries if e["reserved"][index] > 0]
        table.append(
            {
                "id": index,
                "name": soc.removeprefix("Ascend"),
                "bus_id": f"0000:{index + 1:02X}:00.0",
                "capacity_mb": capacity // _MB,
                "used_mb": sum(r for _, _, r in procs) // _MB,
                "aicore": usage[index] if usage else 0,
                "processes": procs,
            }
        )
    return table


def _rule(fill="-"):
    return "+" + fill * 27 + "+" + fill * 15 + "+" + fill * 52 + "+"


def render_info(table):
    lines = ["+" + "-" * 96 + "+", f"| {'npu-smi ' + __version__:<32} {'Version: ' + __version__:<62}|", _rule()]
    lines.append(f"| {'NPU   Name':<26}| {'Health':<14}| {'Power(W)    Temp(C)           Hugepages-Usage(page)':<51}|")
    lines.append(f"| {'Chip':<26}| {'Bus-Id':<14}| {'AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)':<51}|")
    lines.append(_rule("="))
    for d in table:
        lines.append(f"| {d['id']:<6}{d['name']:<20}| {'OK':<14}| {'NA':<12}{'NA':<18}{0:<5}/ {0:<14}|")
        hbm = f"{d['used_mb']:<5}/ {d['capacity_mb']:<14}"
        lines.append(f"| {0:<26}| {d['bus_id']:<14}| {d['aicore']:<12}{0:<5}/ {0:<11}{hbm}|")
        lines.append(_rule("="))
    lines.append(_rule())
    lines.append(f"| {'NPU     Chip':<26}| {'Process id':<14}| {'Process name':<25}| {'Process memory(MB)':<24}|")
    lines.append(_rule("="))
    for d in table:
        if not d["processes"]:
            lines.append(f"| {'No running processes found in NPU ' + str(d['id']):<95}|")
        for pid, name, reserved in d["processes"]:
            lines.append(f"| {d['id']:<8}{0:<18}| {pid:<14}| {name:<25}| {reserved // _MB:<24}|")
        lines.append(_rule("="))
    return "\n".join(lines)


def _fields(pairs):
    return "\n".join(f"        {key:<31}: {value}" for key, value in pairs)


def render_list(table):
    blocks = [_fields([("Total Count", len(table))])]
    for d in table:
        blocks.append(_fields([("NPU ID", d["id"]), ("Product Name", f"vnpu {d['name']}"), ("Chip Count", 1)]))
    return "\n\n".join(blocks)


def render_type(device, kind):
    if kind == "board":
        pairs = [
            ("NPU ID", device["id"]),
            ("Software Version", __version__),
            ("Firmware Version", "NA"),
            ("Board ID", "NA"),
            ("PCIe Bus Info", device["bus_id"]),
            ("Chip Count", 1),
            ("Faulty Chip Count", 0),
        ]
    elif kind == "usages":
        rate = 100 * device["used_mb"] // device["capacity_mb"] if device["capacity_mb"] else 0
        pairs = [
            ("Memory Capacity(MB)", 0),
            ("Memory Usage Rate(%)", 0),
            ("HBM Capacity(MB)", device["capacity_mb"]),
            ("HBM Usage Rate(%)", rate),
            ("Aicore Usage Rate(%)", device["aicore"]),
            ("Aivector Usage Rate(%)", "NA"),
            ("Aicpu Usage Rate(%)", "NA"),
        ]
    else:
        pairs = [("HBM Capacity(MB)", device["capacity_mb"]), ("HBM Clock Speed(MHz)", "NA")]
    return _fields(pairs)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="npu-smi", description="The virtual NPUs and the processes using them.")
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="device and process information")
    info.add_argument("-l", action="store_true", help="list the devices")
    info.add_argument("-t", dest="type", choices=_TYPES, help="what to show about NPU -i")
    info.add_argument("-i", dest="id", type=int, help="NPU id")
    args = parser.parse_args(argv)
    entries = read_registry()
    sampled = args.type == "usages" or (args.type is None and not args.l)
    table = devices(entries, sample_usage(entries) if sampled else None)
    if args.l:
        print(render_list(table))
        return 0
    if args.type is None:
        print(render_info(table))
        return 0
    if args.id is None:
        parser.error(f"info -t {args.type} needs -i <NPU id>")
    if not 0 <= args.id < len(table):
        print(f"Error: the NPU id {args.id} is invalid (this machine has NPU 0 to {len(table) - 1}).", file=sys.stderr)
        return 2
    print(render_type(table[args.id], args.type))
    return 0


if __name__ == "__main__":
    sys.exit(main())
