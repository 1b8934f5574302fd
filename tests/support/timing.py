"""One time scale for every start and wait limit of the suite, from how busy the machine is.

A limit in a test (a server must listen within 30 s, a task must settle within 20 s, an HTTP answer
must arrive within 20 s) is written for an idle machine and multiplied by :func:`time_scale`:
``server.start(timeout_s=scaled(30))``. The scale is measured once per test session, at its start,
as the load per core: the threads ready to run, sampled over half a second (their median), at least
1 and at most :data:`MAX_SCALE`. Not the one-minute load average: it lags both ways, still counting
a test run that ended a minute ago (CI's steps follow each other) and not yet counting busy
processes started a moment ago (the load step's). The measuring process writes it to
:data:`SCALE_VARIABLE`, so the pytest-xdist workers and every process a test starts inherit the same
value instead of measuring again; set the variable yourself to override the measurement
(``MCP_APPROVAL_TEST_TIME_SCALE=4``).

A longer limit only delays the failure of a test that would fail anyway; a limit that is part of
what a test asserts ("answered within 3 s") is not a wait limit and is not scaled.
"""

from __future__ import annotations

import functools
import os
import statistics
import time

__all__ = ["MAX_SCALE", "SCALE_VARIABLE", "describe", "machine_load", "scaled", "time_scale"]

#: Holds the session's scale: set by the process that measured it, read by the rest; set it to override.
SCALE_VARIABLE = "MCP_APPROVAL_TEST_TIME_SCALE"
#: The largest measured scale (30 s limits become 10 minutes): beyond it a run is not worth waiting for.
MAX_SCALE = 20.0
#: The load and cores this process measured the scale from (empty when it read the variable).
_measured: list[tuple[float, int]] = []


@functools.cache
def time_scale() -> float:
    """The factor every start and wait limit of this session is multiplied by (at least 1 when measured).

    Read from :data:`SCALE_VARIABLE` when it is set; otherwise measured now and written there.
    Raises :class:`ValueError` naming the variable when it holds anything but a positive number.
    """
    raw = os.environ.get(SCALE_VARIABLE, "").strip()
    if raw:
        return _parsed(raw)
    load, cores = machine_load()
    _measured.append((load, cores))
    scale = round(min(MAX_SCALE, max(1.0, load / cores)), 2)
    os.environ[SCALE_VARIABLE] = str(scale)
    return scale


def scaled(seconds: float) -> float:
    """``seconds``, a start or wait limit written for an idle machine, for this machine now."""
    return seconds * time_scale()


def describe() -> str:
    """One line for the session's header: the scale and where it came from."""
    scale = time_scale()
    if not _measured:
        return f"start and wait limits x{scale} (from {SCALE_VARIABLE})"
    load, cores = _measured[0]
    return f"start and wait limits x{scale} (load {load:.1f} on {cores} cores at the start; {SCALE_VARIABLE} overrides)"


def machine_load() -> tuple[float, int]:
    """The load to scale by (threads ready to run now, this one aside) and the cores it shares."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return _runnable_now(), cores


def _parsed(raw: str) -> float:
    try:
        scale = float(raw)
    except ValueError:
        scale = 0.0
    if not 0 < scale < float("inf"):
        raise ValueError(f"{SCALE_VARIABLE} must be a positive number (a factor such as 1.5 or 4), not {raw!r}")
    return scale


def _runnable_now(samples: int = 10, every_s: float = 0.05) -> float:
    """The median count of runnable threads but this one over half a second.

    The fourth field of ``/proc/loadavg`` is ``running/total``; the median of ten samples ignores a
    momentary spike. Without ``/proc`` (not Linux), the one-minute load average.
    """
    counts: list[int] = []
    for _ in range(samples):
        try:
            with open("/proc/loadavg", encoding="ascii") as loadavg:
                running = loadavg.read().split()[3].split("/")[0]
        except (OSError, IndexError):
            return os.getloadavg()[0]
        counts.append(max(0, int(running) - 1))
        time.sleep(every_s)  # sampling the run queue over time, not waiting for anything
    return float(statistics.median(counts))


if __name__ == "__main__":  # ``python -m tests.support.timing``: the scale a session started now would use
    print(time_scale())
