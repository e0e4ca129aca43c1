"""Timing shared by the benchmark scripts: the peers' functions are called in turns, a
round at a time, so that drifts of the machine touch all of them alike."""

from __future__ import annotations

import statistics
import time


def median_seconds(fns: dict, rounds: int, warmup: int = 1, repeat: int = 1) -> dict:
    """{name: median seconds of one call} over `rounds` rounds; each round calls every
    function `repeat` times in a row, after `warmup` untimed calls each (tracing,
    compiling, caches)."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(repeat):
                fn()
            times[name].append((time.perf_counter() - start) / repeat)
    return {name: statistics.median(t) for name, t in times.items()}
