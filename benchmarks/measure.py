"""Measurement helpers shared by the benchmarks: timing, interleaving, throughput."""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import os
import statistics
import sys
import time
import traceback
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def exit_code_of(benchmark: Coroutine[Any, Any, int]) -> int:
    """Run a benchmark's ``run``: its exit code, 130 on Ctrl-C, 1 (with the traceback) on an error."""
    try:
        return asyncio.run(benchmark)
    except KeyboardInterrupt:
        return 130
    except Exception:
        traceback.print_exc()
        return 1


def log(message: str) -> None:
    """Print a progress line at once."""
    print(message, flush=True)


async def timed_calls(call: Callable[[], Awaitable[object]], n: int) -> list[int]:
    """Run ``call`` ``n`` times one after another; return each latency in nanoseconds."""
    samples: list[int] = []
    clock = time.perf_counter_ns
    for _ in range(n):
        start = clock()
        await call()
        samples.append(clock() - start)
    return samples


async def paired_calls(
    first: Callable[[], Awaitable[object]], second: Callable[[], Awaitable[object]], n: int
) -> tuple[list[int], list[int]]:
    """``n`` calls of each, interleaved one by one (ABBAABBA...); each latency in nanoseconds.

    Interleaving call by call puts both subjects under the same machine conditions, which on a
    shared VM drift by tens of percent from one 100 ms to the next.
    """
    samples: tuple[list[int], list[int]] = ([], [])
    clock = time.perf_counter_ns
    for i in range(n):
        for which in (0, 1) if i % 2 == 0 else (1, 0):
            call = first if which == 0 else second
            start = clock()
            await call()
            samples[which].append(clock() - start)
    return samples


async def throughput(op: Callable[[int], Awaitable[object]], total: int, concurrency: int) -> float:
    """Operations per second for ``total`` calls of ``op(i)`` spread over ``concurrency`` callers."""
    counter = itertools.count()

    async def caller() -> None:
        while (i := next(counter)) < total:
            await op(i)

    start = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    return total / (time.perf_counter() - start)


def settle() -> None:
    """Collect garbage between rounds so one round's garbage is not charged to the next."""
    gc.collect()


def median(values: Sequence[float]) -> float:
    """The median as a float."""
    return float(statistics.median(values))


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (p99 of 60 samples is the largest but one, not an interpolation)."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(fraction * len(ordered) + 0.5)))
    return ordered[rank - 1]


@dataclass
class Row:
    """One line of a benchmark's final table."""

    figure: str
    measured: str
    baseline: str = ""
    target: str = "-"
    passed: bool | None = None  # None: informative, no target

    @property
    def verdict(self) -> str:
        """PASS or MISS against the target, INFO where there is none."""
        if self.passed is None:
            return "INFO"
        return "PASS" if self.passed else "MISS"


def print_table(rows: Sequence[Row], *, baseline_header: str = "baseline") -> None:
    """Print the rows as an aligned table."""
    headers = ("figure", "measured", baseline_header, "target", "result")
    cells = [(r.figure, r.measured, r.baseline, r.target, r.verdict) for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    print(line(headers))
    print("-+-".join("-" * w for w in widths))
    for cell in cells:
        print(line(cell))


@dataclass
class Report:
    """A benchmark run's table rows and raw figures, for the final table and ``--json``."""

    benchmark: str
    rows: list[Row] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)

    def add(self, row: Row) -> None:
        """Append a row to the final table."""
        self.rows.append(row)

    def document(self, scale: Any, seconds: float, *, baseline_header: str = "baseline") -> dict[str, Any]:
        """The run as a JSON document: command, scale (a dataclass), when, duration, machine, rows and figures."""
        return {
            "benchmark": self.benchmark,
            "command": " ".join([f"benchmarks/{Path(sys.argv[0]).name}", *sys.argv[1:]]),
            "finished": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "scale": asdict(scale),
            "seconds": round(seconds, 1),
            "baseline_header": baseline_header,
            "python": sys.version.split()[0],
            "cpus": os.cpu_count(),
            "rows": [{**asdict(row), "result": row.verdict} for row in self.rows],
            "figures": self.figures,
        }

    def publish(self, scale: Any, seconds: float, *, baseline_header: str, json_target: str | None) -> None:
        """Print the final table; with ``json_target``, the JSON document too (``-``: stdout, else a file)."""
        log(f"\nResults ({scale.name} run, {seconds:.0f} s):\n")
        print_table(self.rows, baseline_header=baseline_header)
        if json_target is None:
            return
        document = json.dumps(self.document(scale, seconds, baseline_header=baseline_header), indent=2)
        if json_target == "-":
            print(document)
        else:
            Path(json_target).write_text(document + "\n")
