"""torch_npu.profiler.analysis.prof_common_func._time_range_calculator: time ranges merged, and the communication
that no computation hides plus the idle gaps, as the "Overlap Analysis" lanes of vnpu's trace count them."""

from torch_npu.profiler import overlap
from torch_npu.profiler.analysis.prof_common_func._time_range_calculator import (
    CommunicationTimeRange,
    RangeCaculator,
    TimeRange,
)


def spans(ranges):
    return [(r.start_ts, r.end_ts) for r in ranges]


def make(pairs, kind=TimeRange):
    return [RangeCaculator.generate_time_range(s, e, kind) for s, e in pairs]


def test_a_generated_range_has_its_bounds_and_class():
    r = RangeCaculator.generate_time_range(3, 9, CommunicationTimeRange)
    assert (r.start_ts, r.end_ts) == (3, 9) and isinstance(r, CommunicationTimeRange)
    assert (TimeRange().start_ts, TimeRange().end_ts) == (-1, -1)


def test_overlapping_ranges_merge_in_time_order():
    merged = RangeCaculator.merge_continuous_intervals(make([(40, 50), (0, 10), (5, 20), (20, 25)]))
    assert spans(merged) == [(0, 25), (40, 50)]
    assert RangeCaculator.merge_continuous_intervals([]) == []


def test_communication_not_hidden_by_computation_and_the_idle_gaps():
    communication = make([(10, 40), (55, 70), (90, 95)], CommunicationTimeRange)
    computing = make([(0, 20), (30, 60)])
    pure, free = RangeCaculator.compute_pipeline_overlap(communication, computing)
    assert spans(pure) == [(20, 30), (60, 70), (90, 95)]
    assert all(isinstance(r, CommunicationTimeRange) for r in pure)
    assert spans(free) == [(70, 90)]
    assert RangeCaculator.compute_pipeline_overlap([], []) == ([], [])


def test_the_split_is_the_trace_views_overlap_lanes():
    kernels = [(0, 20), (30, 60)]
    session = {
        "activities": [{"device": 0, "start_ns": s, "end_ns": e} for s, e in kernels],
        "collectives": [{"device": 0, "start_ns": s, "end_ns": e} for s, e in [(10, 40), (55, 70)]],
    }
    lanes = overlap.device_split(session, 0, 0, 70)
    pure, free = RangeCaculator.compute_pipeline_overlap(
        make([(10, 40), (55, 70)], CommunicationTimeRange), make(kernels)
    )
    assert [list(p) for p in spans(pure)] == lanes["Communication(Not Overlapped)"]
    assert [list(p) for p in spans(free)] == lanes["Free"]
