"""torch_npu's stream sanitizer (TORCH_NPU_SANITIZER set) and the runtime trace points it follows. Each program runs
in a fresh process: the sanitizer's dispatch mode and the trace are process-wide."""

import json

from subprocess_helpers import last_line, run_python

SANITIZED = {"TORCH_NPU_SANITIZER": "1"}

RACES = """
    import json, torch, torch_npu
    from torch.cuda._sanitizer import CUDASanitizerErrors
    side = torch.npu.Stream()
    kept = []  # freeing them while side may still read them would be a race of its own (see record_stream)

    def read_on_side(order):
        a = torch.ones(1000, device="npu")  # written on the default stream
        kept.append(a)
        order(a)
        with torch.npu.stream(side):
            return a * 2

    def event(a):
        e = torch.npu.Event(); e.record(); side.wait_event(e)

    orders = {
        "none": lambda a: None,
        "wait_stream": lambda a: side.wait_stream(torch.npu.current_stream()),
        "wait_event": event,
        "device_synchronize": lambda a: torch.npu.synchronize(),
        "stream_synchronize": lambda a: torch.npu.current_stream().synchronize(),
        "blocking_copy_to_host": lambda a: a.cpu(),
        "item": lambda a: a.sum().item(),
        "non_blocking_copy_to_host": lambda a: a.to("cpu", non_blocking=True),
    }
    result = {}
    for name, order in orders.items():
        try:
            read_on_side(order)
            result[name] = "ordered"
        except CUDASanitizerErrors as errors:
            result[name] = [str(e) for e in errors.errors]
    print(json.dumps(result))
"""


def test_a_read_on_another_stream_without_ordering_is_reported_and_each_ordering_clears_it():
    # a blocking copy to the host and .item() wait for their stream, as on the card; a non-blocking copy does not
    got = json.loads(last_line(run_python(RACES, env=SANITIZED)))
    assert {k: v for k, v in got.items() if k not in ("none", "non_blocking_copy_to_host")} == {
        "wait_stream": "ordered",
        "wait_event": "ordered",
        "device_synchronize": "ordered",
        "stream_synchronize": "ordered",
        "blocking_copy_to_host": "ordered",
        "item": "ordered",
    }
    assert got["non_blocking_copy_to_host"] != "ordered"
    [report] = got["none"]
    assert report.startswith(
        "============================\nCSAN detected a possible data race on tensor with data pointer"
    )
    current, previous = report.split("Previous access by stream")
    assert "aten::mul.Tensor(Tensor self, Tensor other) -> Tensor\nreading from argument(s) self" in current
    assert "aten::ones(" in previous and "writing to the output" in previous


def test_without_the_variable_nothing_is_checked():
    got = json.loads(last_line(run_python(RACES)))
    assert set(got.values()) == {"ordered"}


def test_a_training_step_and_waits_on_the_writing_stream_raise_nothing():
    out = run_python(
        """
        import torch, torch_npu
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32), torch.nn.Linear(32, 4))
        m = m.npu()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
        for _ in range(2):
            x = torch.randn(8, 16).pin_memory().to("npu", non_blocking=True)
            with torch.autocast("npu", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(m(x), torch.randint(0, 4, (8,)).npu())
            loss.backward(); opt.step(); opt.zero_grad()
        side = torch.npu.Stream()
        with torch.npu.stream(side):
            w = torch.full((64,), 3.0, device="npu")
        side.synchronize()
        with torch.npu.stream(side):
            v = torch.full((64,), 2.0, device="npu")
        e = torch.npu.Event(); e.record(side); e.synchronize()
        print(torch_npu.npu._sanitizer.npu_sanitizer.enabled, float((w + v).sum()))
        """,
        env=SANITIZED,
    )
    assert last_line(out) == "True 320.0"


def test_the_runtime_reports_its_trace_points_with_stream_handles():
    out = run_python("""
        import json, torch, torch_npu
        from torch_npu.utils import _npu_trace as trace
        seen = []
        for point in ("event_creation", "event_deletion", "event_record", "event_wait", "memory_allocation",
                      "memory_deallocation", "stream_creation", "device_synchronization", "stream_synchronization",
                      "event_synchronization", "record_stream"):
            register = getattr(trace, f"register_callback_for_npu_{point}")
            register(lambda *args, point=point: seen.append([point, *args]), point)
        torch_npu._C._activate_npu_trace(0)
        side = torch.npu.Stream()
        x = torch.empty(256, device="npu"); ptr = x.data_ptr(); del x
        e = torch.npu.Event(); e.record(side); side.wait_event(e); e.synchronize(); event_id = e.event_id; del e
        side.synchronize(); torch.npu.synchronize()
        kept = torch.empty(4, device="npu"); kept.record_stream(side)
        torch_npu._C._deactivate_npu_trace()
        torch.empty(8, device="npu")  # not traced
        print(json.dumps({"seen": seen, "side": side.npu_stream, "ptr": ptr, "event": event_id, "kept": kept.data_ptr()}))
    """)
    got = json.loads(last_line(out))
    side, ptr, event = got["side"], got["ptr"], got["event"]
    assert got["seen"] == [
        ["stream_creation", side],
        ["memory_allocation", ptr],
        ["memory_deallocation", ptr],
        ["event_creation", event],
        ["event_record", event, side],
        ["event_wait", event, side],
        ["event_synchronization", event],
        ["event_deletion", event],
        ["stream_synchronization", side],
        ["device_synchronization"],
        ["memory_allocation", got["kept"]],
        ["record_stream", got["kept"], side],
    ]


def test_enabling_from_code_and_the_kernel_check_variable():
    out = run_python(
        """
        import json, warnings, torch, torch_npu
        from torch.cuda._sanitizer import CUDASanitizerErrors
        from torch_npu.npu._sanitizer import enable_npu_sanitizer
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            enable_npu_sanitizer(); enable_npu_sanitizer()
        print(json.dumps([str(w.message) for w in caught]))
        a = torch.ones(4, device="npu")
        side = torch.npu.Stream()
        try:
            with torch.npu.stream(side):
                a.add_(1)
        except CUDASanitizerErrors as errors:
            print(len(errors.errors))
        """,
        env={"ASCEND_OPP_DEBUG_PATH": "/opp_debug"},
    )
    warned, races = out.stdout.strip().splitlines()[-2:]
    assert json.loads(warned) == [
        "ASCEND_OPP_DEBUG_PATH is set, but the kernel check runs the card's debug kernels and vnpu has none; "
        "TORCH_NPU_SANITIZER runs the stream check instead."
    ]
    assert races == "1"


def test_memory_freed_while_another_stream_uses_it_needs_record_stream():
    out = run_python(
        """
        import json, torch, torch_npu
        from torch.cuda._sanitizer import CUDASanitizerErrors
        side = torch.npu.Stream()
        result = {}
        cases = (("missing", False, False), ("recorded", True, False), ("ordered", False, True), ("erased", "erase", False))
        for name, record, order in cases:
            x = torch.ones(4096, device="npu"); ptr = x.data_ptr()
            side.wait_stream(torch.npu.current_stream())
            with torch.npu.stream(side):
                y = x * 2
            if record:
                x.record_stream(side)
            if record == "erase":
                torch_npu.erase_stream(x, side)  # the record is dropped again
            if order:
                torch.npu.current_stream().wait_stream(side)
            del x
            try:
                z = torch.zeros(4096, device="npu")
                result[name] = z.data_ptr() == ptr  # the memory is reused
            except CUDASanitizerErrors as errors:
                result[name] = [str(e) for e in errors.errors]
        result["side"] = side.npu_stream
        print(json.dumps(result))
        """,
        env=SANITIZED,
    )
    got = json.loads(last_line(out))
    assert got["recorded"] is True and got["ordered"] is True
    assert len(got["erased"]) == 1 and "may still use it" in got["erased"][0]
    [report] = got["missing"]
    header = report.splitlines()[1]
    assert header.startswith("CSAN detected a possible data race on tensor with data pointer ")
    assert header.endswith(
        f": the memory was freed and reused while stream {got['side']} may still use it (call Tensor.record_stream "
        "on that stream before freeing, or make the streams wait for each other)"
    )
    current, previous = report.split("Previous access by stream")
    assert "aten::zeros(" in current or "aten::fill_" in current or "aten::zero_" in current, current
    assert "aten::mul.Tensor" in previous and "reading from argument(s) self" in previous


def test_the_kernel_check_is_unavailable_and_a_dropped_sanitizer_leaves_its_dispatch_mode(monkeypatch):
    from torch_npu.npu import _sanitizer

    monkeypatch.delenv("ASCEND_OPP_DEBUG_PATH", raising=False)
    sanitizer = _sanitizer.NPUSanitizer()
    assert sanitizer.enable_kernel_check() is False and sanitizer.mode == _sanitizer.SanitizerMode.STREAM
    exits = []

    class Mode:
        def __exit__(self, *args):
            exits.append(args)

    sanitizer.dispatch = Mode()
    sanitizer.__del__()
    assert exits == [(None, None, None)]
