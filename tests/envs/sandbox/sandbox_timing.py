"""Time bounds of the sandbox tests, scaled by how slow this machine is at the moment they are used.

A bound written for an idle machine (a pid namespace torn down within 5 s, a run within its limit plus 30 s)
fails on a loaded one: under ``pytest -n 2`` next to a training test, or on a slower CI CPU. So every wait's
bound is ``bound(seconds)``: the seconds times the slowdown a fixed CPU workload measures now against the
same workload on the idle 2-core development machine (never less than 1, so a fast machine keeps the bound).
"""

from __future__ import annotations

import time

REFERENCE_S = 0.010
"""The workload's best-of-5 wall time on the idle development machine (2-core AMD EPYC, 2026-12-03)."""


def _workload() -> float:
    t0, s = time.perf_counter(), 0
    for i in range(300_000):
        s += i * i
    return time.perf_counter() - t0


def slowdown() -> float:
    """How many times slower than the reference the workload runs now (at least 1)."""
    return max(1.0, min(_workload() for _ in range(5)) / REFERENCE_S)


def bound(seconds: float) -> float:
    """``seconds`` (a bound for the idle machine) scaled to this machine now."""
    return seconds * slowdown()


def wait_until(done, seconds: float, every: float = 0.05) -> bool:
    """Poll ``done()`` until it is true (returns True) or ``bound(seconds)`` has passed (False)."""
    deadline = time.monotonic() + bound(seconds)
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(every)
    return True
