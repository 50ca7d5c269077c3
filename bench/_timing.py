"""Timing helper shared by the benchmarks."""
import time


def best_of(fn, iters, inner=3):
    """Microseconds per call of fn: the best of `inner` loops of `iters` calls."""
    best = float("inf")
    for _ in range(inner):
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        best = min(best, (time.perf_counter() - start) / iters)
    return best * 1e6
