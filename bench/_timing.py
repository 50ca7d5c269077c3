"""Timing helper shared by the benchmarks."""

import time


def best_of(fn, iters, inner=3, clock=time.perf_counter):
    """Microseconds per call of fn: the best of `inner` loops of `iters` calls. With
    clock=time.thread_time, the CPU time of the calling thread (single-threaded work): time the
    hypervisor gives to other machines does not count."""
    best = float("inf")
    for _ in range(inner):
        start = clock()
        for _ in range(iters):
            fn()
        best = min(best, (clock() - start) / iters)
    return best * 1e6
