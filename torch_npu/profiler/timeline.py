"""Placing points of one thread's timeline inside the host operators that were running there: a npu
kernel belongs to the host operator that issued it, a memory event to the operator that allocated or
freed."""

import bisect
import collections

__all__ = ["innermost_enclosing", "nesting_parents", "owning_intervals"]


def innermost_enclosing(intervals, points):
    """For each point (thread, time_ns), the index in `intervals` (dicts with thread, start_ns, end_ns)
    of the innermost interval of the same thread containing it, or None. Intervals nest per thread."""
    by_thread = collections.defaultdict(list)
    for i, iv in enumerate(intervals):
        by_thread[iv["thread"]].append(i)
    # per thread: sweep sorted intervals; for each point the innermost open one is the latest-starting
    # interval that has not ended, found with a stack over the sweep.
    result = [None] * len(points)
    points_by_thread = collections.defaultdict(list)
    for j, (thread, t) in enumerate(points):
        points_by_thread[thread].append((t, j))
    for thread, pts in points_by_thread.items():
        indices = sorted(by_thread.get(thread, ()), key=lambda i: (intervals[i]["start_ns"], -intervals[i]["end_ns"]))
        starts = [intervals[i]["start_ns"] for i in indices]
        pts.sort()
        stack = []
        k = 0
        for t, j in pts:
            upto = bisect.bisect_right(starts, t)
            while k < upto:
                i = indices[k]
                while stack and intervals[stack[-1]]["end_ns"] < intervals[i]["start_ns"]:
                    stack.pop()
                stack.append(i)
                k += 1
            while stack and intervals[stack[-1]]["end_ns"] < t:
                stack.pop()
            result[j] = stack[-1] if stack else None
    return result


def nesting_parents(intervals):
    """For intervals sorted by (start_ns, -end_ns), each one's innermost enclosing interval of the same
    thread (an index), or None."""
    parents, stacks = [], collections.defaultdict(list)
    for iv in intervals:
        stack = stacks[iv["thread"]]
        while stack and intervals[stack[-1]]["end_ns"] < iv["start_ns"]:
            stack.pop()
        parents.append(stack[-1] if stack else None)
        stack.append(len(parents) - 1)
    return parents


def owning_intervals(intervals, points):
    """For each point (thread, time_ns, correlation), the index of the interval with that correlation id
    (PyTorch's, exact), else of the innermost interval of its thread containing it, else None."""
    by_correlation = {iv["correlation"]: i for i, iv in enumerate(intervals) if iv.get("correlation")}
    found = innermost_enclosing(intervals, [(thread, t) for thread, t, _ in points])
    return [by_correlation.get(c, k) if c else k for (_, _, c), k in zip(points, found)]
