"""What an approval-gated task creation costs, against a plain durable one, on ``mcp-approval serve``.

Run from the repository root::

    .venv/bin/python benchmarks/creation_cost_bench.py [--quick] [--postgres-url URL] [--no-postgres] [--json [PATH]]

Two figures (issue 26), both on the treasury example served by ``mcp-approval serve`` (private copies
of the example, see ``approval_bench.OVERRIDES``) with ``[tasks] threshold_s = 0``, so an allowed call
of a client that declared the tasks extension is answered with a durable ``working`` task:

1. *cost*: approval-gated creations (``wire_transfer`` over 25,000) against plain durable creations
   (``wire_transfer`` of 100, allowed, answered with a ``working`` task), on one server per store,
   interleaved round by round, 8 callers; server CPU per creation (plus the database backends' on
   PostgreSQL) and the rate.
2. *workers* (PostgreSQL): gated creations spread over two ``serve`` workers on one database against
   the same calls sent to one of them, same run; CPU per creation over both servers and the backends,
   and the backends waiting on a lock, sampled every 50 ms. Plain durable creations, spread and sent
   the same way in the same rounds, are the control: what a second worker costs on this machine
   for a creation that involves no approval at all.

The table ends with PASS/MISS against the targets; ``--json`` writes the table and the raw figures
(to stdout, or PATH) for ``render.py``. Exit status as for ``approval_bench.py``.
See benchmarks/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # for tests.support

import asyncpg  # type: ignore[import-untyped]  # noqa: E402
from approval_bench import OVERRIDES, PLAIN_AMOUNT, CpuMeter, account, cancel_all, cpu_s, gated_call, http_client  # noqa: E402
from databases import DatabaseKind, Postgres, add_postgres_arguments, database_kinds  # noqa: E402
from measure import Report, Row, exit_code_of, log, median, settle, throughput  # noqa: E402
from sqlalchemy import func, select  # noqa: E402
from tests.support.treasury import TreasuryServer, deployment_dir  # noqa: E402

from mcp_approval.checks.wire import Wire  # noqa: E402
from mcp_approval.storage import open_database  # noqa: E402
from mcp_approval.tasks.schema import tasks_table  # noqa: E402

CPU_RATIO_TARGET = 2.0  # gated CPU per creation / plain CPU per creation, at most
RATE_RATIO_TARGET = 0.5  # gated rate / plain rate, at least
WORKERS_CPU_TARGET = 1.1  # two workers' CPU per creation / one worker's, at most
LOCK_WAIT_TARGET = 0.1  # mean backends waiting on a lock, below
LOCK_SAMPLE_S = 0.05
DRAIN_S = 0.25  # after a plan, before the CPU reading: the last calls' background work (tool run, nudge)
#: ``threshold_s = 0``: an allowed call of a tasks client is a task before it runs (a durable ``working`` task).
DURABLE = {"tasks": {"threshold_s": 0.0}}


@dataclass(frozen=True)
class Scale:
    """How much work each figure does; ``--quick`` scales it down for CI smoke runs."""

    name: str
    rounds: int  # ABBA rounds: each plan runs once per round
    warmup: int  # calls of each plan before the first round
    calls: int  # per plan per round
    concurrency: int
    worker_rounds: int  # rounds of the two-worker figure (--quick: only with --only workers)


FULL = Scale("full", 6, 60, 300, 8, 6)
QUICK = Scale("quick", 2, 20, 80, 8, 2)

Plan = tuple[str, Callable[[int], Awaitable[object]]]


async def durable_call(wire: Wire) -> str:
    """An allowed transfer of 100, answered with a durable `working` task (no approval); returns its id."""
    result = (await wire.call_tool("wire_transfer", {"to": account(), "amount": PLAIN_AMOUNT})).result
    if result.get("resultType") != "task" or result.get("status") != "working":
        raise RuntimeError(f"a plain call did not answer with a working task: {result!r}")
    return str(result["taskId"])


class Meter:
    """CPU seconds of some server processes plus, on PostgreSQL, the database's backends."""

    def __init__(self, pids: list[int], postgres: Postgres | None) -> None:
        self.first = CpuMeter(pids[0], postgres)  # follows the backends
        self.others = pids[1:]

    async def read(self) -> tuple[float, float]:
        """(servers, database backends) CPU seconds so far (backends counted from the first reading)."""
        server, database = await self.first.read()
        return server + sum(cpu_s(pid) for pid in self.others), database


def pid_of(server: TreasuryServer) -> int:
    return server.process.pid if server.process is not None else 0


@dataclass
class LockWaits:
    """Samples of the backends of the bench database waiting on a lock: how many, and on what."""

    counts: list[int] = field(default_factory=list)
    statements: Counter[str] = field(default_factory=Counter)  # "<wait_event>: <statement's start>"

    @property
    def mean(self) -> float:
        return sum(self.counts) / len(self.counts) if self.counts else 0.0


@asynccontextmanager
async def lock_waits(postgres: Postgres | None) -> AsyncIterator[LockWaits]:
    """Sample, every 50 ms until the block ends, the backends of the bench database waiting on a lock."""
    waits = LockWaits()
    if postgres is None:
        yield waits
        return
    conn = await asyncpg.connect(postgres.admin_dsn, timeout=5)
    query = (
        "SELECT wait_event, left(regexp_replace(query, '\\s+', ' ', 'g'), 70) AS query FROM pg_stat_activity"
        " WHERE datname = $1 AND wait_event_type = 'Lock'"
    )

    async def sample() -> None:
        while True:
            rows = await conn.fetch(query, postgres.name)
            waits.counts.append(len(rows))
            waits.statements.update(f"{row['wait_event']}: {row['query']}" for row in rows)
            await asyncio.sleep(LOCK_SAMPLE_S)

    sampler = asyncio.create_task(sample())
    try:
        yield waits
    finally:
        sampler.cancel()
        await asyncio.gather(sampler, return_exceptions=True)
        await conn.close()


@dataclass
class Sample:
    """One plan's run: its rate, CPU ms per creation and (PostgreSQL) mean backends waiting on a lock."""

    rate: float
    cpu_ms: float  # servers and database backends
    database_ms: float  # the database backends' share
    lock_waits: float
    waiting_on: dict[str, int]  # the statements seen waiting, with how many samples saw each


async def run_plan(op: Callable[[int], Awaitable[object]], n: int, callers: int, meter: Meter) -> Sample:
    settle()
    await asyncio.sleep(0.3)  # the previous plan's cancellations and background checks end first
    before = await meter.read()
    async with lock_waits(meter.first.postgres) as waits:
        rate = await throughput(op, n, callers)
        await asyncio.sleep(DRAIN_S)
    after = await meter.read()
    database_ms = (after[1] - before[1]) * 1000 / n
    cpu_ms = (after[0] - before[0]) * 1000 / n + database_ms
    return Sample(rate, cpu_ms, database_ms, waits.mean, dict(waits.statements.most_common(5)))


async def interleaved(
    plans: list[Plan], rounds: int, scale: Scale, meter: Meter, after_plan: Callable[[], Awaitable[None]]
) -> dict[str, list[Sample]]:
    """Each plan once per round, in ABBA order; ``after_plan`` runs after each (outside the readings)."""
    samples: dict[str, list[Sample]] = {name: [] for name, _ in plans}
    for round_no in range(rounds):
        for name, op in plans if round_no % 2 == 0 else list(reversed(plans)):
            samples[name].append(await run_plan(op, scale.calls, scale.concurrency, meter))
            await after_plan()
        log(
            "  round "
            + f"{round_no + 1}: "
            + "; ".join(f"{n} {s[-1].rate:.0f}/s {s[-1].cpu_ms:.2f} ms" for n, s in samples.items())
        )
    return samples


async def task_counts(url: str) -> dict[str, int]:
    """Rows of the tasks table by status (the check that every requested creation left its row)."""
    db = open_database(url)
    try:
        query = select(tasks_table.c.status, func.count()).group_by(tasks_table.c.status)
        rows = await db.read(lambda conn: conn.execute(query).all())
    finally:
        await db.close()
    return {str(status): int(count) for status, count in rows}


@asynccontextmanager
async def workers(kind: DatabaseKind, name: str, count: int) -> AsyncIterator[tuple[list[TreasuryServer], str]]:
    """``count`` ``serve`` processes of one deployment on one fresh database."""
    merged = {section: {**values, **DURABLE.get(section, {})} for section, values in OVERRIDES.items()}
    directory = deployment_dir(kind.workdir, merged, name=name)
    url = await kind.fresh()
    servers: list[TreasuryServer] = []
    try:
        for _ in range(count):  # one after another: the first migrates the database
            servers.append(TreasuryServer(directory, db_url=url).start(timeout_s=90))
        yield servers, url
    finally:
        for server in servers:
            server.kill()


def ratio_of(samples: dict[str, list[Sample]], top: str, bottom: str, field: str) -> float:
    """The median over rounds of ``top``'s ``field`` over ``bottom``'s, paired round by round."""
    pairs = zip(samples[top], samples[bottom], strict=True)
    return median([getattr(a, field) / getattr(b, field) for a, b in pairs])


def summary(samples: dict[str, list[Sample]]) -> dict[str, Any]:
    return {
        name: {
            "rate_median": median([s.rate for s in values]),
            "cpu_ms_median": median([s.cpu_ms for s in values]),
            "database_ms_median": median([s.database_ms for s in values]),
            "lock_waits_mean": sum(s.lock_waits for s in values) / len(values),
            "waiting_on": dict(sum((Counter(s.waiting_on) for s in values), Counter()).most_common(5)),
            "rounds": [vars(s) for s in values],
        }
        for name, values in samples.items()
    }


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


# -- 1. gated vs plain durable creation -------------------------------------------------------


async def bench_cost(scale: Scale, kind: DatabaseKind, report: Report) -> None:
    conc = scale.concurrency
    log(f"\n[1] approval-gated vs plain durable task creation on {kind.label}, {conc} callers")
    async with (
        workers(kind, f"cost-{kind.label.lower()}", 1) as (servers, url),
        http_client(servers[0].base_url) as http,
    ):
        alice = Wire(http, token="alice-token")
        created: list[str] = []

        async def gated(_i: int) -> None:
            created.append(await gated_call(alice))

        async def plain(_i: int) -> None:
            await durable_call(alice)

        async def withdraw() -> None:  # cancelled, so the driver never polls a growing pending set
            await cancel_all(alice, created, conc)

        await throughput(gated, scale.warmup, conc)
        await throughput(plain, scale.warmup, conc)
        await withdraw()
        meter = Meter([pid_of(servers[0])], kind.postgres)
        samples = await interleaved([("gated", gated), ("plain", plain)], scale.rounds, scale, meter, withdraw)
        await asyncio.sleep(1.0)  # the last plain tasks complete
        counts = await task_counts(url)
        ledger = len(servers[0].ledger())
    per_plan = scale.warmup + scale.rounds * scale.calls
    log(f"  tasks by status: {counts}; ledger entries {ledger}; requested {per_plan} of each")
    if counts.get("cancelled") != per_plan or counts.get("completed") != per_plan or ledger != per_plan:
        raise RuntimeError(f"expected {per_plan} cancelled and {per_plan} completed tasks and ledger entries")
    cpu = ratio_of(samples, "gated", "plain", "cpu_ms")
    rate = ratio_of(samples, "gated", "plain", "rate")
    figures = summary(samples)
    report.figures[f"cost_{kind.label.lower()}"] = {**figures, "cpu_ratio": cpu, "rate_ratio": rate, "tasks": counts}
    gated_s, plain_s = figures["gated"], figures["plain"]
    who = "server + database backends" if kind.postgres is not None else "server"
    rounds = plural(scale.rounds, "round")
    gated_db = plain_db = ""
    if kind.postgres is not None:
        gated_db, plain_db = (f" (backends {f['database_ms_median']:.2f})" for f in (gated_s, plain_s))
    report.add(
        Row(
            f"CPU per creation, approval-gated / plain durable, {kind.label}, {conc} callers",
            f"x{cpu:.2f}",
            f"{who}: gated {gated_s['cpu_ms_median']:.2f} ms{gated_db}, "
            f"plain {plain_s['cpu_ms_median']:.2f} ms{plain_db} ({rounds})",
            f"<= x{CPU_RATIO_TARGET:.1f}",
            cpu <= CPU_RATIO_TARGET,
        )
    )
    report.add(
        Row(
            f"creations/s, approval-gated / plain durable, {kind.label}, {conc} callers",
            f"x{rate:.2f}",
            f"gated {gated_s['rate_median']:.0f}/s, plain {plain_s['rate_median']:.0f}/s",
            f">= x{RATE_RATIO_TARGET:.1f}",
            rate >= RATE_RATIO_TARGET,
        )
    )


# -- 2. two workers on one PostgreSQL database ------------------------------------------------


async def bench_workers(scale: Scale, kind: DatabaseKind, report: Report) -> None:
    conc = scale.concurrency
    log(f"\n[2] approval-gated creations on two `serve` workers vs one, one {kind.label} database, {conc} callers")
    log("    (with plain durable creations, the same way, as the control: what a second worker costs here anyway)")
    async with (
        workers(kind, "workers", 2) as (servers, url),
        http_client(servers[0].base_url) as first,
        http_client(servers[1].base_url) as second,
    ):
        wires = [Wire(first, token="alice-token"), Wire(second, token="alice-token")]
        created: list[str] = []

        async def one(_i: int) -> None:
            created.append(await gated_call(wires[0]))

        async def two(i: int) -> None:
            created.append(await gated_call(wires[i % 2]))

        async def one_plain(_i: int) -> None:
            await durable_call(wires[0])

        async def two_plain(i: int) -> None:
            await durable_call(wires[i % 2])

        async def withdraw() -> None:
            await cancel_all(wires[0], created, conc)

        await throughput(two, scale.warmup, conc)
        await throughput(two_plain, scale.warmup, conc)
        await withdraw()
        meter = Meter([pid_of(server) for server in servers], kind.postgres)
        plans: list[Plan] = [
            ("one worker", one),
            ("two workers", two),
            ("plain, one", one_plain),
            ("plain, two", two_plain),
        ]
        samples = await interleaved(plans, scale.worker_rounds, scale, meter, withdraw)
        await asyncio.sleep(1.0)  # the last plain tasks complete
        counts = await task_counts(url)
    per_kind = scale.warmup + 2 * scale.worker_rounds * scale.calls
    log(f"  tasks by status: {counts}; requested {per_kind} of each kind")
    for name, values in summary(samples).items():
        log(f"  {name}: statements seen waiting on a lock (samples): {values['waiting_on'] or 'none'}")
    if counts.get("cancelled") != per_kind or counts.get("completed") != per_kind:
        raise RuntimeError(f"expected {per_kind} cancelled and {per_kind} completed tasks")
    cpu = ratio_of(samples, "two workers", "one worker", "cpu_ms")
    control = ratio_of(samples, "plain, two", "plain, one", "cpu_ms")
    figures = summary(samples)
    report.figures["workers_postgresql"] = {**figures, "cpu_ratio": cpu, "control_cpu_ratio": control, "tasks": counts}
    report.add(_workers_row(f"CPU per gated creation, two workers / one, {kind.label}, {conc} callers", cpu, figures))
    report.add(
        Row(
            f"  control: CPU per plain durable creation, two workers / one, {kind.label}",
            f"x{control:.2f}",
            _workers_context(figures["plain, two"], figures["plain, one"])
            + f"; gated ratio / this: x{cpu / control:.2f}",
            "-",
        )
    )
    one_s, two_s = figures["one worker"], figures["two workers"]
    report.add(
        Row(
            f"backends waiting on a lock, two workers, {kind.label} (mean of 50 ms samples)",
            f"{two_s['lock_waits_mean']:.2f}",
            f"one worker {one_s['lock_waits_mean']:.2f}; most seen waiting: {next(iter(two_s['waiting_on']), 'none')}",
            f"< {LOCK_WAIT_TARGET:g}",
            two_s["lock_waits_mean"] < LOCK_WAIT_TARGET,
        )
    )


def _workers_context(two: dict[str, Any], one: dict[str, Any]) -> str:
    two_cpu, one_cpu = (f"{f['cpu_ms_median']:.2f} ms (backends {f['database_ms_median']:.2f})" for f in (two, one))
    return (
        f"both servers + backends: two {two_cpu}, one {one_cpu}; "
        f"rate two {two['rate_median']:.0f}/s, one {one['rate_median']:.0f}/s"
    )


def _workers_row(figure: str, cpu: float, figures: dict[str, Any]) -> Row:
    context = _workers_context(figures["two workers"], figures["one worker"])
    return Row(figure, f"x{cpu:.2f}", context, f"<= x{WORKERS_CPU_TARGET:.1f}", cpu <= WORKERS_CPU_TARGET)


# -- main ------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> int:
    scale = QUICK if args.quick else FULL
    started = time.perf_counter()
    log(f"creation cost benchmark ({scale.name}); python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    postgres: Postgres | None = None
    if not args.no_postgres:
        postgres = await Postgres.create_or_explain(args.postgres_url)
        if postgres is None:
            return 2
        log(f"PostgreSQL scratch database: {postgres.name}")
    report = Report("creation_cost_bench")
    try:
        with tempfile.TemporaryDirectory(prefix="mcpa-cost-bench-") as tmp:
            kinds = database_kinds(Path(tmp), postgres, prefix="cost")
            for kind in kinds:
                if args.only in (None, "cost"):
                    await timed(bench_cost(scale, kind, report))
            # --quick skips the two-worker figure (two more server starts) unless it is asked for alone.
            wanted = args.only == "workers" or (args.only is None and not args.quick)
            if kinds[-1].postgres is not None and wanted:
                await timed(bench_workers(scale, kinds[-1], report))
    finally:
        if postgres is not None:
            await postgres.drop()
    report.publish(scale, time.perf_counter() - started, baseline_header="context", json_target=args.json)
    return 0


async def timed(figure: Awaitable[None]) -> None:
    section = time.perf_counter()
    await figure
    log(f"  ({time.perf_counter() - section:.1f} s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Approval-gated vs plain durable task creation on `mcp-approval serve`."
    )
    parser.add_argument("--quick", action="store_true", help="a short run for CI smoke use")
    add_postgres_arguments(parser)
    parser.add_argument("--only", choices=("cost", "workers"), help="run one figure only")
    parser.add_argument(
        "--json", nargs="?", const="-", metavar="PATH", help="also write the results as JSON (to stdout, or PATH)"
    )
    return exit_code_of(run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
