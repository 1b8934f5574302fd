"""The sync path of the tasks extension over HTTP: ``echo`` answered inline, against plain ``mcp``.

Run from the repository root::

    .venv/bin/python benchmarks/sync_path_bench.py [--quick] [--rounds N] [--calls N]

Three server processes on 127.0.0.1 (one uvicorn worker each) run side by side for the whole
run: the plain ``mcp`` ``MCPServer`` of ``peers.py``, and the tasks demo server
(``mcp_approval.testing.tasks_demo``, SQLite, threshold 5 s) twice, once with ``echo`` in
``optional`` mode (the call may become a task, finishes at once, and is answered inline) and once
in ``forbidden`` mode. One client (raw JSON-RPC over keep-alive HTTP, 8 connections, the tasks
extension declared) measures calls/s and the server's CPU per call on each in turn; the order of
the subjects alternates from round to round, the ratio to the plain server is taken per round
and its median printed, so the drift of a shared machine hits every subject alike. The exit status is 0 whatever the
figures are, 1 when the benchmark itself fails.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from pathlib import Path

from measure import Report, Row, exit_code_of, log, median, settle
from peers import Subject, echo_rate, plain_subject, running

#: The optional-tool sync path over HTTP should keep this share of plain throughput (issue 15).
OPTIONAL_RATIO_TARGET = 0.97
#: Server CPU per optional call over plain mcp's, at most: x1.08-1.14 measured on 6854340, plus 5 % (issue 26).
OPTIONAL_CPU_TARGET = 1.2


@dataclass(frozen=True)
class Scale:
    name: str
    rounds: int
    calls: int  # per subject per round


FULL = Scale("full", 9, 2_000)
QUICK = Scale("quick", 3, 300)


def demo_subject(label: str, db_url: str, echo_mode: str) -> Subject:
    """The tasks demo server with ``echo`` in ``echo_mode`` and a 5 s threshold."""

    def command(port: int) -> list[str]:
        demo = [sys.executable, "-m", "mcp_approval.testing.tasks_demo", "--port", str(port), "--db", db_url]
        return [*demo, "--threshold", "5", "--poll-interval", "1.0", "--mode", f"echo={echo_mode}"]

    return Subject(label, command)


async def run(args: argparse.Namespace) -> int:
    scale = QUICK if args.quick else FULL
    scale = replace(scale, rounds=args.rounds or scale.rounds, calls=args.calls or scale.calls)
    rounds, calls, started = scale.rounds, scale.calls, time.perf_counter()
    log(f"sync path benchmark ({scale.name}): {rounds} rounds of {calls} calls per subject, 8 connections")
    with tempfile.TemporaryDirectory(prefix="mcpa-sync-") as tmp:
        subjects = {
            "plain": plain_subject(),
            "optional": demo_subject("echo optional", f"sqlite:///{Path(tmp) / 'optional.db'}", "optional"),
            "forbidden": demo_subject("echo forbidden", f"sqlite:///{Path(tmp) / 'forbidden.db'}", "forbidden"),
        }
        async with AsyncExitStack() as stack:
            clients = {name: await stack.enter_async_context(running(s)) for name, s in subjects.items()}
            rates: dict[str, list[float]] = {name: [] for name in subjects}
            cpu_ms: dict[str, list[float]] = {name: [] for name in subjects}
            names = list(subjects)
            for round_no in range(rounds):
                for name in names if round_no % 2 == 0 else reversed(names):
                    settle()
                    before = subjects[name].cpu_s()
                    rates[name].append(await echo_rate(clients[name], calls))
                    cpu_ms[name].append(1000 * (subjects[name].cpu_s() - before) / calls)
                log("  round " + ", ".join(f"{n} {rates[n][-1]:.0f}/s {cpu_ms[n][-1]:.3f} ms" for n in names))
    report = Report("sync_path_bench")
    report.figures["calls_per_s"] = rates
    report.figures["server_cpu_ms_per_call"] = cpu_ms
    rate_target = Target(f">= {OPTIONAL_RATIO_TARGET}", lambda ratio: ratio >= OPTIONAL_RATIO_TARGET)
    cpu_target = Target(f"<= x{OPTIONAL_CPU_TARGET}", lambda ratio: ratio <= OPTIONAL_CPU_TARGET)
    for name in ("optional", "forbidden"):
        report.add(_ratio_row(name, "calls/s", rates, "{:.0f}/s", rate_target))
    for name in ("optional", "forbidden"):
        report.add(_ratio_row(name, "server CPU per call", cpu_ms, "{:.3f} ms", cpu_target))
    report.publish(scale, time.perf_counter() - started, baseline_header="context", json_target=args.json)
    return 0


@dataclass(frozen=True)
class Target:
    """A row's target as printed, and the check of the measured ratio against it."""

    text: str
    met: Callable[[float], bool]


def _ratio_row(name: str, measure: str, values: dict[str, list[float]], unit: str, target: Target) -> Row:
    """``name``'s median per-round ratio to plain mcp; the target applies to the optional path only."""
    ratios = [ext / plain for ext, plain in zip(values[name], values["plain"], strict=True)]
    ratio = median(ratios)
    optional = name == "optional"
    return Row(
        f"sync echo ({name}) / plain mcp, {measure}, HTTP x8",
        f"x{ratio:.3f} ({unit.format(median(values[name]))})",
        f"plain {unit.format(median(values['plain']))}; rounds {', '.join(f'{r:.3f}' for r in ratios)}",
        target.text if optional else "-",
        target.met(ratio) if optional else None,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The tasks extension's sync path over HTTP against plain mcp.")
    parser.add_argument("--quick", action="store_true", help="a short run for CI smoke use")
    parser.add_argument("--rounds", type=int, help="rounds (default: 9, --quick 3)")
    parser.add_argument("--calls", type=int, help="calls per subject per round (default: 2,000, --quick 300)")
    parser.add_argument(
        "--json", nargs="?", const="-", metavar="PATH", help="also write the results as JSON (to stdout, or PATH)"
    )
    return exit_code_of(run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
