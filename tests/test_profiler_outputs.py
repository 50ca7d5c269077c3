"""torch_npu.profiler beyond the kernel files: host lanes (PyTorch's CPU profiler) with record_function,
mstx and stacks linked to the npu kernels, profile_memory files from the allocator, analyse() re-parsing,
dynamic_profile driven by a JSON file, export_stacks."""

import csv
import glob
import json
import os

import pytest
import torch
from subprocess_helpers import run_python

import torch_npu
from torch_npu.profiler import ascend_output, dynamic_profile, memory_output
from torch_npu.profiler.program_profile import parse_options


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def _session(tmp_path):
    (session,) = glob.glob(str(tmp_path / "*_ascend_pt"))
    return session


def _out(session, name):
    return os.path.join(session, "ASCEND_PROFILER_OUTPUT", name)


def test_host_lanes_hold_ranges_and_stacks_and_each_kernel_flows_from_its_operator(tmp_path):
    a = torch.randn(16, 16, device="npu")
    with torch_npu.profiler.profile(
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(str(tmp_path)), with_stack=True, record_shapes=True
    ) as prof:
        with torch.profiler.record_function("my_forward"):
            b = a @ a
        with torch_npu.npu.mstx.mstx_range("my_mstx_range"):
            b.relu()
    trace = json.load(open(_out(_session(tmp_path), "trace_view.json")))
    ranges = {e["name"] for e in trace if e.get("cat") == "user_annotation"}
    assert {"my_forward", "my_mstx_range"} <= ranges
    kernels = [e for e in trace if e.get("cat") == "kernel"]
    assert [k["name"] for k in kernels] == ["mm", "relu"]
    starts = {e["id"]: e for e in trace if e["ph"] == "s"}
    ends = {e["id"]: e for e in trace if e["ph"] == "f"}
    assert set(starts) == set(ends) == set(range(1, len(kernels) + 1))
    host_ops = {(e["tid"], e["ts"]): e for e in trace if e.get("cat") == "cpu_op"}
    for flow_id, start in starts.items():
        source = host_ops[(start["tid"], start["ts"])]
        kernel = next(k for k in kernels if k["ts"] == ends[flow_id]["ts"] and k["tid"] == ends[flow_id]["tid"])
        assert source["name"] == "aten::" + kernel["name"]
        assert source["ts"] <= kernel["ts"] and kernel["ts"] + kernel["dur"] <= source["ts"] + source["dur"] + 1e-3
    session = prof._session  # each kernel is linked by PyTorch's correlation id, not by the clocks
    for activity, parent in zip(session["activities"], session["kernel_parents"]):
        assert activity["correlation"] != 0 and session["host_events"][parent]["correlation"] == activity["correlation"]
    mm = next(e for e in trace if e.get("cat") == "cpu_op" and e["name"] == "aten::mm")
    assert mm["args"]["Input Dims"] == [[16, 16], [16, 16]] and "test_profiler_outputs.py" in mm["args"]["Call stack"]
    details = _rows(_out(_session(tmp_path), "operator_details.csv"))
    mm_row = next(r for r in details[1:] if r[0] == "aten::mm")
    assert "test_profiler_outputs.py" in mm_row[2] and float(mm_row[5]) > 0  # Call Stack, Device Self Duration
    matmul_row = next(r for r in details[1:] if r[0] == "aten::matmul")
    assert float(matmul_row[5]) == 0 and float(matmul_row[6]) == float(mm_row[6])  # mm issued it: total, not self
    stacks = tmp_path / "stacks.txt"
    prof.export_stacks(str(stacks))
    assert any(line.split(";")[-1].startswith("aten::mm ") for line in stacks.read_text().splitlines())


def test_profile_memory_files_follow_the_allocator(tmp_path):
    torch.npu.synchronize()
    with torch_npu.profiler.profile(
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(str(tmp_path)), profile_memory=True
    ) as prof:
        x = torch.ones(256, 1024, device="npu")  # 1 MiB
        y = x + 1
        del x
        total = y.sum()
    events = prof.memory_events_recorded
    assert events and all(e[5] == 0 for e in events)
    for previous, event in zip(events, events[1:]):  # each total moves by exactly the event's block
        assert event[2] - previous[2] == event[1]
    assert events[-1][2] == torch.npu.memory_allocated(0) and events[-1][3] == torch.npu.memory_reserved(0)
    session = _session(tmp_path)
    records = _rows(_out(session, "memory_record.csv"))
    assert records[0] == memory_output.MEMORY_RECORD_HEADER and len(records) - 1 == len(events)
    assert records[-1][2] == str(round(torch.npu.memory_allocated(0) / 2**20, 4)) and records[-1][6] == "NPU:0"
    blocks = _rows(_out(session, "operator_memory.csv"))
    assert blocks[0] == memory_output.OPERATOR_MEMORY_HEADER
    assert len(blocks) - 1 == sum(e[1] > 0 for e in events)
    ones, add = blocks[1], next(r for r in blocks[1:] if r[0] == "aten::add")
    assert ones[0] == "aten::empty" and float(ones[1]) == events[0][1] / 1024 >= 1024  # torch.ones allocates via empty
    assert float(ones[3]) > float(ones[2]) and float(ones[5]) > 0  # x was freed: release time, duration
    assert float(add[1]) == float(ones[1]) and add[3] == ""  # y is alive at stop: no release
    assert _rows(_out(session, "npu_module_mem.csv"))[0] == memory_output.MODULE_MEM_HEADER
    trace = json.load(open(_out(session, "trace_view.json")))
    assert sum(e["ph"] == "C" for e in trace) == len(events)
    del total, y


def test_analyse_parses_raw_data_again_to_the_same_files(tmp_path):
    model = torch.nn.Linear(8, 4).npu()
    with torch_npu.profiler.profile(
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(str(tmp_path), analyse_flag=False),
        record_shapes=True,
        profile_memory=True,
    ):
        model(torch.randn(2, 8, device="npu")).sum().backward()
    session = _session(tmp_path)
    assert not os.path.exists(os.path.join(session, "ASCEND_PROFILER_OUTPUT"))
    (parsed,) = torch_npu.profiler.analyse(str(tmp_path))
    first = {n: open(os.path.join(parsed, n)).read() for n in os.listdir(parsed)}
    assert {"kernel_details.csv", "memory_record.csv", "trace_view.json"} <= set(first)
    torch_npu.profiler.profiler.analyse(session)  # the session itself, via torch_npu's module path
    assert {n: open(os.path.join(parsed, n)).read() for n in os.listdir(parsed)} == first


def test_analyse_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError) as missing:
        torch_npu.profiler.analyse(str(tmp_path / "nowhere"))
    assert str(missing.value) == f"profiler_path does not exist or is not a directory: {tmp_path / 'nowhere'}"
    with pytest.raises(FileNotFoundError, match="no profiling data to analyse under"):
        torch_npu.profiler.analyse(str(tmp_path))
    bad = tmp_path / "w_1_ascend_pt" / "FRAMEWORK"
    bad.mkdir(parents=True)
    (bad / "vnpu_profiler_data.json").write_text("{not json")
    with pytest.raises(ValueError, match="is not valid profiling data"):
        torch_npu.profiler.analyse(str(tmp_path))


def _step(model, opt):
    opt.zero_grad()
    model(torch.ones(2, 4, device="npu")).sum().backward()
    opt.step()


def test_dynamic_profile_starts_when_the_config_file_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(dynamic_profile, "_state", dynamic_profile._DynamicProfile())
    cfg_dir, out = tmp_path / "cfg", tmp_path / "out"
    dynamic_profile.init(str(cfg_dir))
    config_file = cfg_dir / "profiler_config.json"
    template = json.loads(config_file.read_text())
    assert template["active"] == 1 and template["activities"] == ["CPU", "NPU"]
    model = torch.nn.Linear(4, 2).npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    counted = []
    hook = torch_npu._C._add_python_op_hook(lambda name, *a: counted.append(name))
    try:
        _step(model, opt)
        per_step = len(counted)
        for _ in range(2):
            _step(model, opt)
            dynamic_profile.step()
        assert not out.exists()  # unchanged file: nothing profiled
        config = dict(template, prof_dir=str(out), active=2, start_step=4, analyse=True)
        config_file.write_text(json.dumps(config))
        stamp = os.stat(config_file).st_mtime_ns + 10**9
        os.utime(config_file, ns=(stamp, stamp))
        for _ in range(6):
            _step(model, opt)
            dynamic_profile.step()
    finally:
        torch_npu._C._remove_op_hook(hook)
    (session,) = glob.glob(str(out / "*_ascend_pt"))
    kernels = _rows(_out(session, "kernel_details.csv"))
    assert kernels[0][0] == "Step Id" and sorted({r[0] for r in kernels[1:]}) == ["0", "1"]
    assert len(kernels) - 1 == 2 * per_step
    metadata = json.load(open(os.path.join(session, "profiler_metadata.json")))
    assert metadata["dynamic_profile"]["start_step"] == 4


def test_dynamic_profile_of_a_resumed_job_counts_steps_from_set_state(tmp_path, monkeypatch):
    monkeypatch.setattr(dynamic_profile, "_state", dynamic_profile._DynamicProfile())
    cfg_dir, out = tmp_path / "cfg", tmp_path / "out"
    with pytest.warns(UserWarning) as bad:
        dynamic_profile.set_state({"cur_step": -1})
        dynamic_profile.set_state(10)
        dynamic_profile.set_state({"cur_step": True})
    assert [str(w.message) for w in bad] == [
        "dynamic_profile.set_state: expected a dict whose 'cur_step' is an integer >= 0, got "
        f"{value}; the step count stays 0"
        for value in ("{'cur_step': -1}", "10", "{'cur_step': True}")
    ]
    dynamic_profile.set_state({"cur_step": 10})  # the job ran 10 steps before it was restarted
    dynamic_profile.init(str(cfg_dir))
    config_file = cfg_dir / "profiler_config.json"
    config = dict(json.loads(config_file.read_text()), prof_dir=str(out), active=1, start_step=12)
    config_file.write_text(json.dumps(config))
    stamp = os.stat(config_file).st_mtime_ns + 10**9
    os.utime(config_file, ns=(stamp, stamp))
    model = torch.nn.Linear(4, 2).npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):  # steps 11, 12 and 13 of the job: step 12 reaches start_step
        _step(model, opt)
        dynamic_profile.step()
    (session,) = glob.glob(str(out / "*_ascend_pt"))
    metadata = json.load(open(os.path.join(session, "profiler_metadata.json")))
    assert metadata["dynamic_profile"]["start_step"] == 12


def test_dynamic_profile_start_and_bad_config(tmp_path, monkeypatch):
    monkeypatch.setattr(dynamic_profile, "_state", dynamic_profile._DynamicProfile())
    config = tmp_path / "profiler_config.json"
    config.write_text(json.dumps({"prof_dir": str(tmp_path / "out"), "active": "3"}))
    with pytest.raises(ValueError) as bad:
        dynamic_profile.start(str(config))
    assert str(bad.value) == f"dynamic_profile: {config}: 'active' must be an integer >= 1, got '3'"
    config.write_text(json.dumps({"prof_dir": str(tmp_path / "out"), "active": 1, "analyse": True}))
    dynamic_profile.start(str(config))
    torch.ones(2, device="npu").add(1)
    dynamic_profile.step()
    (session,) = glob.glob(str(tmp_path / "out" / "*_ascend_pt"))
    assert "add" in {r[2] for r in _rows(_out(session, "kernel_details.csv"))[1:]}


def test_program_profile_options_are_validated():
    assert parse_options("record_shapes, profile_memory")["profile_memory"] is True
    with pytest.raises(ValueError) as bad:
        parse_options("record_shapes,with_gpu")
    assert str(bad.value) == (
        "VNPU_PROFILE_OPTIONS: unknown option(s) with_gpu; choose from record_shapes, "
        "profile_memory, with_stack, with_modules, with_flops"
    )


def test_results_before_any_saved_session_are_refused(tmp_path):
    prof = torch_npu.profiler.profile()
    for export in (prof.export_chrome_trace, prof.export_stacks):
        with pytest.raises(RuntimeError, match="no profiling data has been saved yet"):
            export(str(tmp_path / "out.txt"))
    assert not (tmp_path / "out.txt").exists() and prof.get_trace_id() == ""


def test_activities_and_handler_arguments_are_checked():
    prof = torch_npu.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.PrivateUse1]
    )
    assert prof.activities == torch_npu.profiler.supported_activities()
    with pytest.raises(TypeError) as bad:
        torch_npu.profiler.profile(activities=["NPU"])
    assert str(bad.value) == "activities must be torch_npu.profiler.ProfilerActivity values (CPU, NPU), got 'NPU'"
    with pytest.raises(TypeError) as flag:
        torch_npu.profiler.tensorboard_trace_handler("out", analyse_flag="yes")
    assert str(flag.value) == "analyse_flag must be a bool, but got str"


def test_a_full_trace_view_follows_the_chrome_trace_event_rules(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).npu()
    with torch_npu.profiler.profile(
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(str(tmp_path)),
        schedule=torch_npu.profiler.schedule(wait=0, warmup=0, active=2, repeat=1),
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
    ) as prof:
        for _ in range(2):
            with torch_npu.npu.mstx.mstx_range("step"):
                model(torch.randn(4, 8, device="npu")).sum().backward()
            prof.step()
    trace = json.load(open(_out(_session(tmp_path), "trace_view.json")))
    assert isinstance(trace, list) and trace
    flows = {"s": [], "f": []}
    for event in trace:
        assert event["ph"] in ("X", "M", "s", "f", "C") and isinstance(event["name"], str)
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
        if event["ph"] == "M":
            assert event["name"] in (
                "process_name",
                "process_labels",
                "process_sort_index",
                "thread_name",
                "thread_sort_index",
            )
            continue
        assert isinstance(event["ts"], float) and event["ts"] >= 0
        if event["ph"] == "X":
            assert isinstance(event["dur"], float) and event["dur"] >= 0 and isinstance(event["args"], dict)
        elif event["ph"] == "C":
            assert all(isinstance(v, float) for v in event["args"].values())
        else:
            assert 0 < event["id"] < 2**53 and event["cat"] == "async_npu"
            flows[event["ph"]].append(event["id"])
    assert sorted(flows["s"]) == sorted(flows["f"]) == list(range(1, len(flows["s"]) + 1))
    steps = [e["name"] for e in trace if e.get("cat") == "cpu_op" and e["name"].startswith("ProfilerStep#")]
    assert steps == ["ProfilerStep#0", "ProfilerStep#1"]


def test_trace_view_uses_the_kernel_details_clock_and_torch_npus_process_names(tmp_path):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).npu()
    with torch_npu.profiler.profile(
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(str(tmp_path)),
        schedule=torch_npu.profiler.schedule(wait=0, warmup=0, active=2, repeat=1),
    ) as prof:
        for _ in range(2):
            model(torch.randn(4, 8, device="npu")).sum().backward()
            prof.step()
    trace = json.load(open(_out(_session(tmp_path), "trace_view.json")))
    names = {e["pid"]: e["args"]["name"] for e in trace if e["name"] == "process_name"}
    assert sorted(names.values()) == ["Ascend Hardware", "HCCL", "Overlap Analysis", "Python"]
    hardware = next(pid for pid, name in names.items() if name == "Ascend Hardware")
    kernel_starts = sorted(e["ts"] for e in trace if e["ph"] == "X" and e["pid"] == hardware)
    with open(_out(_session(tmp_path), "kernel_details.csv")) as f:
        csv_starts = sorted(float(row["Start Time(us)"]) for row in csv.DictReader(f))
    assert kernel_starts == csv_starts and kernel_starts[0] > 1.6e15  # epoch microseconds in both files
    overlap = next(pid for pid, name in names.items() if name == "Overlap Analysis")
    lanes = {e["name"] for e in trace if e["ph"] == "X" and e["pid"] == overlap}
    assert {"Computing", "Free"} <= lanes and lanes <= {
        "Computing",
        "Communication",
        "Communication(Not Overlapped)",
        "Free",
    }
    computing = sum(e["dur"] for e in trace if e["ph"] == "X" and e["pid"] == overlap and e["name"] == "Computing")
    with open(_out(_session(tmp_path), "step_trace_time.csv")) as f:
        assert computing == pytest.approx(sum(float(row["Computing"]) for row in csv.DictReader(f)), abs=0.01)


def test_sessions_saved_in_the_same_millisecond_get_their_own_directories(tmp_path, monkeypatch):
    import datetime

    class Frozen(datetime.datetime):
        @classmethod
        def now(cls, tz=None):
            return cls(2026, 11, 29, 23, 0, 0, 123000)

    monkeypatch.setattr(ascend_output.datetime, "datetime", Frozen)
    first = ascend_output.worker_dir(str(tmp_path), "w")
    assert os.path.basename(first) == "w_20261129230000123_ascend_pt"
    os.makedirs(first)
    assert os.path.basename(ascend_output.worker_dir(str(tmp_path), "w")) == "w_20261129230000124_ascend_pt"


def _profile_with(tmp_path, export_type):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).npu()
    config = torch_npu.profiler._ExperimentalConfig(export_type=export_type)
    with torch_npu.profiler.profile(
        on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(str(tmp_path)),
        schedule=torch_npu.profiler.schedule(wait=0, warmup=0, active=2, repeat=1),
        experimental_config=config,
        record_shapes=True,
    ) as prof:
        for _ in range(2):
            model(torch.randn(4, 8, device="npu")).sum().backward()
            prof.step()
    return _session_dir(str(tmp_path))


def test_db_export_writes_torch_npus_databases_and_no_text_files(tmp_path):
    import sqlite3

    out = _profile_with(tmp_path / "db", torch_npu.profiler.ExportType.Db)
    assert sorted(os.listdir(out)) == ["analysis.db", "ascend_pytorch_profiler.db"]
    text = _profile_with(tmp_path / "text", [torch_npu.profiler.ExportType.Text, torch_npu.profiler.ExportType.Db])
    with open(os.path.join(text, "kernel_details.csv")) as f:
        kernels = list(csv.DictReader(f))
    db = sqlite3.connect(os.path.join(text, "ascend_pytorch_profiler.db"))
    rows = db.execute(
        "SELECT n.value, t.value, TASK.startNs, TASK.endNs FROM COMPUTE_TASK_INFO c "
        "JOIN TASK ON TASK.globalTaskId = c.globalTaskId JOIN STRING_IDS n ON n.id = c.name "
        "JOIN STRING_IDS t ON t.id = c.opType ORDER BY TASK.startNs"
    ).fetchall()
    assert [(r[0], r[1]) for r in rows] == [(k["Name"], k["Type"]) for k in kernels]
    for (_, _, start, end), k in zip(rows, kernels):
        assert start / 1000 == pytest.approx(float(k["Start Time(us)"]), abs=0.5)
        assert (end - start) / 1000 == pytest.approx(float(k["Duration(us)"]), abs=0.01)
    linked = db.execute("SELECT COUNT(*) FROM TASK JOIN CANN_API ON CANN_API.connectionId = TASK.connectionId")
    assert linked.fetchone()[0] == len(kernels)
    assert [r[0] for r in db.execute("SELECT id FROM STEP_TIME ORDER BY id")] == [0, 1]
    analysis = sqlite3.connect(os.path.join(text, "analysis.db"))
    with open(os.path.join(text, "step_trace_time.csv")) as f:
        computing = [float(r["Computing"]) for r in csv.DictReader(f)]
    assert [r[0] for r in analysis.execute("SELECT computing FROM StepTraceTime")] == computing


def _session_dir(root):
    (found,) = [os.path.join(d, "ASCEND_PROFILER_OUTPUT") for d in glob.glob(os.path.join(root, "*_ascend_pt"))]
    return found


def test_cpu_only_profiling_writes_no_device_tables_and_metadata_json_is_parsed(tmp_path):
    x = torch.randn(8, 8, device="npu")
    cpu_only = [torch_npu.profiler.ProfilerActivity.CPU]
    handler = torch_npu.profiler.tensorboard_trace_handler(str(tmp_path / "cpu"))
    with torch_npu.profiler.profile(activities=cpu_only, on_trace_ready=handler) as prof:
        x @ x
        prof.add_metadata_json("run", '{"lr": 0.1, "tags": ["a"]}')
        prof.add_metadata_json("broken", "{not json")
    out = _session_dir(str(tmp_path / "cpu"))
    assert not os.path.exists(os.path.join(out, "kernel_details.csv"))
    assert not os.path.exists(os.path.join(out, "task_time.csv"))
    assert os.path.exists(os.path.join(out, "operator_details.csv"))
    with open(os.path.join(os.path.dirname(out), "profiler_metadata.json")) as f:
        metadata = json.load(f)
    assert metadata["run"] == {"lr": 0.1, "tags": ["a"]} and "broken" not in metadata


def test_a_default_run_writes_msprofs_task_table(tmp_path):
    x = torch.randn(8, 8, device="npu")
    with torch_npu.profiler.profile(on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(str(tmp_path))):
        y = x @ x
        y.relu()
    with open(os.path.join(_session_dir(str(tmp_path)), "task_time.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == [
        "Device_id",
        "kernel_name",
        "kernel_type",
        "stream_id",
        "task_id",
        "task_time(us)",
        "task_start(us)",
        "task_stop(us)",
    ]
    kinds = {r["kernel_name"]: r["kernel_type"] for r in rows}
    assert kinds["mm"] == "AI_CORE" and kinds["relu"] == "AI_VECTOR_CORE"
    for r in rows:
        # microsecond timestamps near 1.8e15 keep quarter-microseconds
        assert float(r["task_stop(us)"]) - float(r["task_start(us)"]) == pytest.approx(
            float(r["task_time(us)"]), abs=0.5
        )
    assert [int(r["task_id"]) for r in rows] == list(range(len(rows)))


def test_without_a_handler_the_session_goes_to_the_ascend_work_path(tmp_path):
    proc = run_python(
        """
        import torch, torch_npu
        x = torch.randn(4, 4, device="npu")
        with torch_npu.profiler.profile():
            x @ x
    """,
        env={"ASCEND_WORK_PATH": str(tmp_path)},
    )
    assert proc.returncode == 0
    assert os.path.exists(os.path.join(_session_dir(str(tmp_path / "profiling_data")), "kernel_details.csv"))


def test_kineto_profile_is_the_profilers_core(tmp_path):
    assert issubclass(torch_npu.profiler.profile, torch_npu.profiler._KinetoProfile)
    x = torch.randn(8, 8, device="npu")
    prof = torch_npu.profiler._KinetoProfile(activities=[torch_npu.profiler.ProfilerActivity.NPU])
    prof.start()
    x @ x
    prof.stop()
    trace = tmp_path / "trace.json"
    prof.export_chrome_trace(str(trace))
    events = json.loads(trace.read_text())
    names = {e.get("name") for e in (events["traceEvents"] if isinstance(events, dict) else events)}
    assert any(n and "mm" in n for n in names), sorted(n for n in names if n)[:20]


def test_add_metadata_json_warns_about_what_it_cannot_store(tmp_path):
    with torch_npu.profiler.profile(on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(str(tmp_path))) as p:
        with pytest.warns(UserWarning) as caught:
            p.add_metadata_json("broken", "{not json")
            p.add_metadata_json("object", {"a": 1})
    assert [str(w.message) for w in caught] == [
        "add_metadata_json: value of 'broken' is not valid JSON: '{not json'",
        "add_metadata_json: value of 'object' must be a JSON string, got dict",
    ]
