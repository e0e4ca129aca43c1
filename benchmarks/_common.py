"""Timing shared by the benchmark scripts: the peers' functions are called in turns, a
round at a time, so that drifts of the machine touch all of them alike.

Every round's times go to stderr. The statistic reported is the median round, or the
fastest with `KBERT_BENCH_STAT=min` (for a machine whose speed switches between levels
during a run: the fastest rounds are then the ones run at the same level)."""

from __future__ import annotations

import os
import statistics
import sys
import time

STATISTICS = {"median": statistics.median, "min": min}


def median_seconds(fns: dict, rounds: int, warmup: int = 1, repeat: int = 1) -> dict:
    """{name: seconds of one call, the median (or `KBERT_BENCH_STAT`) over `rounds`
    rounds}; each round calls every function `repeat` times in a row, after `warmup`
    untimed calls each (tracing, compiling, caches)."""
    stat = os.environ.get("KBERT_BENCH_STAT", "median")
    if stat not in STATISTICS:
        raise SystemExit(f"error: KBERT_BENCH_STAT={stat!r}: use one of {', '.join(STATISTICS)}")
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
    print("# seconds per call, round by round: " + "; ".join(
        f"{name} " + " ".join(f"{t:.3g}" for t in ts) for name, ts in times.items()),
        file=sys.stderr, flush=True)
    return {name: STATISTICS[stat](t) for name, t in times.items()}
