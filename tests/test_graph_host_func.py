"""Host functions on a stream (torch_npu.npu._subscribe_report / _launch_host_func / _unsubscribe_report), as
inference engines launch them inside NPU graphs: the callable runs in stream order at every replay and never at
capture; outside a capture at once; a stream without a subscription is refused."""

import pytest
import torch
from error_cases import raises_exactly

import torch_npu


def _record_sum(seen):
    return lambda x: seen.append(x.sum().item())


def test_a_captured_host_function_runs_at_each_replay_between_the_operators_around_it():
    stream = torch.npu.Stream()
    torch_npu.npu._subscribe_report(stream)
    x = torch.ones(4, device="npu")
    seen = []
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, stream=stream):
        x.add_(1)
        torch_npu.npu._launch_host_func(torch.npu.current_stream(), _record_sum(seen), x)
        x.mul_(3)
    assert seen == []  # capturing ran the operators (x is 6 now) but not the host function
    cpu, expected = torch.full((4,), 6.0), []
    for _ in range(3):
        g.replay()
        cpu.add_(1)
        expected.append(cpu.sum().item())
        cpu.mul_(3)
    assert seen == expected  # the value between add_ and mul_ of each replay
    assert torch.equal(x.cpu(), cpu)
    torch_npu.npu._unsubscribe_report(stream)


def test_outside_a_capture_the_host_function_runs_at_once_with_its_user_data():
    stream = torch.npu.current_stream()
    torch_npu.npu._subscribe_report(stream)
    torch_npu.npu._subscribe_report(stream)  # subscribing again changes nothing
    calls = []
    torch_npu.npu._launch_host_func(stream, calls.append, ["kv", 3])
    assert calls == [["kv", 3]]
    torch_npu.npu._unsubscribe_report(stream)


def test_graphs_keep_their_host_functions_after_unsubscribing_and_launching_needs_a_subscription():
    stream = torch.npu.Stream()
    torch_npu.npu._subscribe_report(stream)
    calls = []
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g, stream=stream):
        torch_npu.npu._launch_host_func(stream, calls.append, 1)
    torch_npu.npu._unsubscribe_report(stream)
    g.replay()
    assert calls == [1]
    raises_exactly(
        lambda: torch_npu.npu._launch_host_func(stream, calls.append, 2),
        RuntimeError,
        f"_launch_host_func: stream {stream} has no report thread to run host functions (aclrtLaunchCallback needs "
        "a subscribed stream): call torch_npu.npu._subscribe_report(stream) first",
    )
    assert calls == [1]


def test_a_stream_argument_that_is_not_a_stream_is_a_type_error():
    raises_exactly(
        lambda: torch_npu.npu._subscribe_report("npu:0"),
        TypeError,
        "_subscribe_report: op_stream must be a torch.npu.Stream, but got str",
    )
    with pytest.raises(TypeError, match="_launch_host_func: op_stream must be a torch.npu.Stream, but got int"):
        torch_npu.npu._launch_host_func(0, print, None)
