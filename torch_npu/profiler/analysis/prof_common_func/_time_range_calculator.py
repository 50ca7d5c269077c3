"""Time ranges and how communication overlaps computation, at torch_npu's import path (tools that read
profiles import RangeCaculator from here). The interval algebra is the one vnpu's "Overlap Analysis" lanes use
(torch_npu.profiler.overlap): communication not covered by computation, and the gaps where neither runs."""

from dataclasses import dataclass

from torch_npu.profiler import overlap

__all__ = []

DEFAULT_INT_VALUE = -1


@dataclass
class TimeRange:
    start_ts: int = DEFAULT_INT_VALUE
    end_ts: int = DEFAULT_INT_VALUE


class CommunicationTimeRange(TimeRange):
    """A range in which a collective is in flight."""


class RangeCaculator:  # torch_npu's spelling
    @staticmethod
    def generate_time_range(start, end, class_range=TimeRange):
        time_range = class_range()
        time_range.start_ts, time_range.end_ts = start, end
        return time_range

    @staticmethod
    def merge_continuous_intervals(time_range_list):
        """The ranges merged where they overlap or touch, in time order (of the first range's class)."""
        if not time_range_list:
            return []
        kind = type(time_range_list[0])
        merged = overlap.union((r.start_ts, r.end_ts) for r in time_range_list)
        return [RangeCaculator.generate_time_range(start, end, kind) for start, end in merged]

    @staticmethod
    def compute_pipeline_overlap(communication_range, compute_range):
        """(communication while nothing computes, as CommunicationTimeRange; the gaps in which neither runs,
        between the first start and the last end, as TimeRange)."""
        communication = overlap.union((r.start_ts, r.end_ts) for r in communication_range)
        computing = overlap.union((r.start_ts, r.end_ts) for r in compute_range)
        busy = overlap.union(communication + computing)
        if not busy:
            return [], []
        pure = overlap.difference(communication, computing)
        free = overlap.difference([[busy[0][0], busy[-1][1]]], busy)
        make = RangeCaculator.generate_time_range
        return [make(s, e, CommunicationTimeRange) for s, e in pure], [make(s, e) for s, e in free]
