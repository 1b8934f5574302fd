"""Benchmark of SEP-2848 tool approval against a real ``mcp-approval serve`` process.

Run from the repository root::

    .venv/bin/python benchmarks/approval_bench.py [--quick] [--postgres-url URL] [--no-postgres] [--json [PATH]]

Every figure is measured against the treasury example served by ``mcp-approval serve`` (a
subprocess, over streamable HTTP on 127.0.0.1), on a private copy of the example whose config
raises the per-principal limits (see ``OVERRIDES``). The final table lists each figure with its
target and PASS/MISS (INFO where the figure has no target); ``--json`` also writes the table and
the raw figures as JSON (to stdout, or to PATH). The exit status is 0 whatever the figures are,
2 when PostgreSQL is not reachable and ``--no-postgres`` was not given, 1 on any other error.
See benchmarks/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # for tests.support

import asyncpg  # type: ignore[import-untyped]  # noqa: E402
import httpx  # noqa: E402
from databases import DatabaseKind, Postgres, add_postgres_arguments, database_kinds  # noqa: E402
from measure import Report, Row, exit_code_of, log, median, percentile, settle, throughput  # noqa: E402
from sqlalchemy import Connection, func, select, update  # noqa: E402
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir  # noqa: E402

from mcp_approval.approval.persistence.schema import approval_workflows_table  # noqa: E402
from mcp_approval.checks.wire import Wire  # noqa: E402
from mcp_approval.config import load_config  # noqa: E402
from mcp_approval.server.local_backend import local_backend_from_config  # noqa: E402
from mcp_approval.storage import open_database  # noqa: E402
from mcp_approval.storage.database import Database  # noqa: E402

_W = approval_workflows_table

CREATE_TARGET_SQLITE = 200.0  # approval-gated creations per second
CALLBACK_P50_TARGET_MS = 100.0
RESTART_TARGET_S = 5.0
GATED_AMOUNT = 50_000  # over 25,000: a requestable denial, so a `working` approval task
PLAIN_AMOUNT = 100  # allowed outright: the tool runs inline
POLL_INTERVAL_S = 1.0  # [approval] poll_interval_s: the resolver looks at a pending request this often
RESTART_LEASE_S = 2.0  # [approval] lease_s for figure 3 (see the README)
BULK_POLL_S = 600.0  # [approval] poll_interval_s while figure 3 creates its pending tasks
UNLIMITED = 1_000_000_000

#: Config overrides of every server: the example's intervals, with the per-principal limits lifted.
OVERRIDES: dict[str, dict[str, Any]] = {
    "tasks": {
        "poll_interval_s": 1.0,
        "threshold_s": 5.0,
        "max_tasks": UNLIMITED,
        "max_per_principal": UNLIMITED,
    },
    "approval": {
        "poll_interval_s": POLL_INTERVAL_S,
        "lease_s": 15.0,
        "intent_grace_s": 30.0,
        "submissions_per_minute": UNLIMITED,
        "max_pending_per_principal": UNLIMITED,
    },
}


# -- configuration ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Scale:
    """How much work each figure does; ``--quick`` scales it down for CI smoke runs."""

    name: str
    rounds: int  # rounds of the creation-rate figure
    create_warmup: int
    create_calls: int  # per plan per round
    latency_samples: int  # per path
    pending_tasks: int  # figure 3
    restart_sample: int  # old tasks read back with tasks/get after the restart
    concurrency: int
    bulk_concurrency: int
    growth_tasks: int  # figure 4: pending approvals created without cancelling any
    growth_slice: int  # figure 4: the rate is reported per slice of this many creations


FULL = Scale("full", 3, 60, 240, 50, 10_000, 20, 8, 16, 10_000, 1_000)
QUICK = Scale("quick", 1, 20, 60, 10, 500, 5, 8, 16, 900, 300)


# -- databases and servers -------------------------------------------------------------------


@dataclass
class Served:
    """A running treasury server, an HTTP client to it, and a reader of its database."""

    server: TreasuryServer
    http: httpx.AsyncClient
    db: Database
    url: str

    @property
    def alice(self) -> Wire:
        return Wire(self.http, token="alice-token")

    @property
    def carol(self) -> Reviewer:
        return Reviewer(self.http, "carol-token")

    async def handle_of(self, task_id: str) -> str:
        """The backend request id (the reviewer API's approval id) of an approval task."""
        query = select(_W.c.handle).where(_W.c.task_id == task_id)
        handle = await self.db.read(lambda conn: conn.execute(query).scalar_one_or_none())
        if not isinstance(handle, str):
            raise RuntimeError(f"task {task_id} has no approval handle")
        return handle


def http_client(base_url: str) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    return httpx.AsyncClient(base_url=base_url, timeout=60, limits=limits)


@asynccontextmanager
async def served(
    kind: DatabaseKind, name: str, overrides: dict[str, dict[str, Any]] | None = None, *, url: str | None = None
) -> AsyncIterator[Served]:
    merged = {section: dict(values) for section, values in OVERRIDES.items()}
    for section, values in (overrides or {}).items():
        merged.setdefault(section, {}).update(values)
    directory = deployment_dir(kind.workdir, merged, name=name)
    url = url or await kind.fresh()
    server = TreasuryServer(directory, db_url=url).start(timeout_s=60)
    db = open_database(url)
    try:
        async with http_client(server.base_url) as http:
            yield Served(server, http, db, url)
    finally:
        server.kill()
        await db.close()


_accounts = 0


def account() -> str:
    """A fresh payee, so no two calls of this run are identical (dedup never short-circuits)."""
    global _accounts
    _accounts += 1
    return f"acct-{os.getpid()}-{_accounts}"


async def gated_call(wire: Wire) -> str:
    """A transfer over 25,000: answered with a `working` approval task; returns its id."""
    reply = await wire.call_tool("wire_transfer", {"to": account(), "amount": GATED_AMOUNT})
    result = reply.result
    if result.get("resultType") != "task" or result.get("status") != "working":
        raise RuntimeError(f"a gated call did not answer with a working task: {result!r}")
    return str(result["taskId"])


async def plain_call(wire: Wire) -> None:
    """A transfer of 100: allowed, run inline (the ledger append is fsynced)."""
    result = (await wire.call_tool("wire_transfer", {"to": account(), "amount": PLAIN_AMOUNT})).result
    if result.get("isError") or result.get("resultType") == "task":
        raise RuntimeError(f"a plain call did not run inline: {result!r}")


async def cancel_all(wire: Wire, task_ids: list[str], concurrency: int) -> None:
    async def cancel(i: int) -> None:
        await wire.cancel(task_ids[i])

    await throughput(cancel, len(task_ids), concurrency)
    task_ids.clear()


# -- 1. creations per second -----------------------------------------------------------------


async def bench_creation(scale: Scale, kind: DatabaseKind, report: Report) -> None:
    conc = scale.concurrency
    log(f"\n[1] approval-gated creations/s vs. plain allowed calls/s on {kind.label} (HTTP, `mcp-approval serve`)")
    async with served(kind, f"create-{kind.label.lower()}") as srv:
        alice = srv.alice
        created: list[str] = []

        async def gated(_i: int) -> None:
            created.append(await gated_call(alice))

        async def plain(_i: int) -> None:
            await plain_call(alice)

        plans: list[tuple[str, Callable[[int], Awaitable[None]], int]] = [
            ("gated seq", gated, 1),
            (f"gated x{conc}", gated, conc),
            ("plain seq", plain, 1),
            (f"plain x{conc}", plain, conc),
        ]
        await throughput(gated, scale.create_warmup, conc)
        await throughput(plain, scale.create_warmup, conc)
        await cancel_all(alice, created, conc)
        rates: dict[str, list[float]] = {name: [] for name, _, _ in plans}
        for round_no in range(scale.rounds):
            for name, op, callers in plans if round_no % 2 == 0 else list(reversed(plans)):
                settle()
                await asyncio.sleep(0.3)  # let the previous plan's background checks finish
                rates[name].append(await throughput(op, scale.create_calls, callers))
                # Withdraw this round's approvals, so the resolver does not poll an ever-growing set.
                await cancel_all(alice, created, conc)
    rate = {name: median(values) for name, values in rates.items()}
    log("  calls/s: " + ", ".join(f"{name} {value:.0f}" for name, value in rate.items()))
    report.figures[f"create_{kind.label.lower()}"] = {"median": rate, "rounds": rates}
    for mode, callers in (("seq", 1), (f"x{conc}", conc)):
        gated_rate, plain_rate = rate[f"gated {mode}"], rate[f"plain {mode}"]
        is_sqlite = kind.postgres is None
        report.add(
            Row(
                f"approval-gated creations/s, {kind.label}, {'sequential' if callers == 1 else f'{callers} callers'}",
                f"{gated_rate:.0f}/s",
                f"plain call {plain_rate:.0f}/s (x{gated_rate / plain_rate:.2f})",
                f">= {CREATE_TARGET_SQLITE:.0f}/s" if is_sqlite else "-",
                gated_rate >= CREATE_TARGET_SQLITE if is_sqlite else None,
            )
        )


# -- 2. decision-to-completed latency --------------------------------------------------------


async def wait_completed(wire: Wire, task_id: str, pause_s: float, timeout_s: float = 30.0) -> dict[str, Any]:
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        task = (await wire.get(task_id)).result
        if task.get("status") == "completed":
            return task
        if task.get("status") != "working":
            raise RuntimeError(f"task {task_id} ended {task.get('status')}: {task!r}")
        if pause_s:
            await asyncio.sleep(pause_s)
    raise RuntimeError(f"task {task_id} not completed within {timeout_s} s of the decision")


async def bench_latency(scale: Scale, kind: DatabaseKind, report: Report) -> None:
    log(f"\n[2] decision-to-completed latency on {kind.label} (poll_interval_s = {POLL_INTERVAL_S})")
    async with served(kind, f"latency-{kind.label.lower()}") as srv:
        alice = srv.alice
        config = load_config(srv.server.directory / "config.toml")
        other_db = open_database(srv.url)  # another writer of the same database, not the server's listener
        other = local_backend_from_config(config, other_db, with_resolvers=False)
        try:
            results: dict[str, list[float]] = {"callback": [], "polling": []}
            decide_ms: dict[str, list[float]] = {"callback": [], "polling": []}
            for _warm in range(3):  # warm-up of both paths, not counted
                for path in results:
                    await one_sample(srv, alice, other.decide, path)
            for i in range(scale.latency_samples * 2):
                path = ("callback", "polling")[i % 2] if (i // 2) % 2 == 0 else ("polling", "callback")[i % 2]
                total, decided = await one_sample(srv, alice, other.decide, path)
                results[path].append(total)
                decide_ms[path].append(decided)
        finally:
            await other_db.close()
    summary: dict[str, dict[str, float]] = {}
    for path, samples in results.items():
        p50, p99 = median(samples), percentile(samples, 0.99)
        summary[path] = {
            "p50_ms": p50,
            "p99_ms": p99,
            "mean_ms": statistics.fmean(samples),
            "decide_p50_ms": median(decide_ms[path]),
            "samples": len(samples),
        }
        log(
            f"  {path}: p50 {p50:.1f} ms, p99 {p99:.1f} ms, mean {statistics.fmean(samples):.1f} ms "
            f"(the decide request itself: p50 {median(decide_ms[path]):.1f} ms; {len(samples)} samples)"
        )
    report.figures[f"latency_{kind.label.lower()}"] = {"poll_interval_s": POLL_INTERVAL_S, **summary}
    cb, pl = summary["callback"], summary["polling"]
    is_sqlite = kind.postgres is None
    report.add(
        Row(
            f"decision->completed, callback path, {kind.label}: p50 / p99",
            f"{cb['p50_ms']:.0f} / {cb['p99_ms']:.0f} ms",
            f"decide request p50 {cb['decide_p50_ms']:.0f} ms",
            f"p50 <= {CALLBACK_P50_TARGET_MS:.0f} ms" if is_sqlite else "-",
            cb["p50_ms"] <= CALLBACK_P50_TARGET_MS if is_sqlite else None,
        )
    )
    report.add(
        Row(
            f"decision->completed, polling path, {kind.label}: p50 / p99",
            f"{pl['p50_ms']:.0f} / {pl['p99_ms']:.0f} ms",
            f"poll_interval_s {POLL_INTERVAL_S:g}",
        )
    )


Decide = Callable[..., Awaitable[object]]


async def one_sample(srv: Served, alice: Wire, other_decide: Decide, path: str) -> tuple[float, float]:
    """Create a gated call, decide it, and time decide → ``completed`` (ms); also the decide call's own ms."""
    task_id = await gated_call(alice)
    handle = await srv.handle_of(task_id)
    # Let the creation's own check finish, and start at a random phase of the resolver's schedule.
    await asyncio.sleep(random.uniform(0.05, 0.25))
    start = time.perf_counter()
    if path == "callback":
        response = await srv.carol.decide(handle, "approve")
        if response.status_code != 200:
            raise RuntimeError(f"decide answered {response.status_code}: {response.text}")
    else:
        await other_decide(handle, "carol", "approve")
    decided = time.perf_counter()
    task = await wait_completed(alice, task_id, pause_s=0.0 if path == "callback" else 0.005)
    done = time.perf_counter()
    result = task.get("result") or {}
    if result.get("isError"):
        raise RuntimeError(f"an approved call did not run: {task!r}")
    return (done - start) * 1000, (decided - start) * 1000


# -- 3. restart with many pending tasks ------------------------------------------------------


async def pending_state(db: Database, before_ms: int) -> tuple[int, int, int]:
    """(pending workflows, those with next_check_at <= before_ms, latest next_check_at or lease end)."""

    def read(conn: Connection) -> tuple[int, int, int]:
        pending = _W.c.phase == "pending"
        total = conn.execute(select(func.count()).where(pending)).scalar_one()
        due = conn.execute(select(func.count()).where(pending, _W.c.next_check_at <= before_ms)).scalar_one()
        latest = conn.execute(
            select(func.max(_W.c.next_check_at), func.max(_W.c.lease_expires_at)).where(pending)
        ).one()
        return int(total), int(due), max(int(latest[0] or 0), int(latest[1] or 0))

    return await db.read(read)


async def mark_all_due(db: Database, now_ms: int) -> int:
    """Set every pending workflow's next check to ``now_ms``; returns how many there are."""

    def write(conn: Connection) -> int:
        return int(conn.execute(update(_W).where(_W.c.phase == "pending").values(next_check_at=now_ms)).rowcount)

    return await db.write(write)


async def bench_restart(scale: Scale, kind: DatabaseKind, report: Report) -> None:
    n = scale.pending_tasks
    log(f"\n[3] restart with {n:,} pending approval tasks on {kind.label}")
    name = f"restart-{kind.label.lower()}"
    # While the tasks are created, the resolver checks each once (the nudge after creation) and then
    # leaves it for BULK_POLL_S: creation is not slowed by polling an ever-growing pending set.
    bulk = {"approval": {"lease_s": RESTART_LEASE_S, "poll_interval_s": BULK_POLL_S}}
    async with served(kind, name, bulk) as srv:
        alice = srv.alice
        created: list[str] = []

        async def create(_i: int) -> None:
            created.append(await gated_call(alice))

        started = time.perf_counter()
        bulk_rate = await throughput(create, n, scale.bulk_concurrency)
        took = time.perf_counter() - started
        log(f"  created {len(created):,} pending tasks over HTTP in {took:.1f} s ({bulk_rate:.0f}/s)")
        sample = random.sample(created, min(scale.restart_sample, len(created)))
        srv.server.kill()  # SIGKILL: no shutdown code runs
        # Every pending workflow due now: the state a server polling every POLL_INTERVAL_S leaves behind.
        marked = await mark_all_due(srv.db, round(time.time() * 1000))
        total, _, latest = await pending_state(srv.db, 0)
        if total != n or marked != n:
            raise RuntimeError(f"expected {n} pending workflows, found {total} ({marked} marked due)")
        # Start only once every old lease and scheduled check has passed, so each workflow's
        # next_check_at moving past the start time can only be the new process's doing.
        wait_s = max(0.0, (latest - time.time() * 1000) / 1000) + 0.1
        log(f"  killed; all {n:,} marked due; waiting {wait_s:.1f} s for the old leases to pass")
        await asyncio.sleep(wait_s)
        deployment_dir(
            kind.workdir, {**OVERRIDES, "approval": {**OVERRIDES["approval"], "lease_s": RESTART_LEASE_S}}, name=name
        )

        start_ms = round(time.time() * 1000)
        start = time.perf_counter()
        starter = asyncio.create_task(asyncio.to_thread(srv.server.start, timeout_s=120))
        answered_s = await first_answers(alice, sample, start)
        await starter
        log(f"  answered tasks/get for {len(sample)} old tasks after {answered_s:.2f} s (reconciled before listening)")
        pass_s, timed_out = await resolver_pass(srv.db, start_ms, start, timeout_s=max(120.0, n / 20))
        suffix = " (timed out)" if timed_out else ""
        log(f"  every pending workflow re-checked by the new process after {pass_s:.2f} s{suffix}")
    report.figures[f"restart_{kind.label.lower()}"] = {
        "pending": n,
        "creation": f"HTTP tools/call (the real creation path), {scale.bulk_concurrency} concurrent callers",
        "bulk_create_per_s": bulk_rate,
        "answers_tasks_get_s": answered_s,
        "resolver_pass_s": pass_s,
        "pass_timed_out": timed_out,
        "lease_s": RESTART_LEASE_S,
        "poll_interval_s": POLL_INTERVAL_S,
    }
    target = f"<= {RESTART_TARGET_S:.0f} s"
    report.add(
        Row(
            f"restart, {n:,} pending, {kind.label}: start -> tasks/get answers",
            f"{answered_s:.2f} s",
            "includes imports and startup reconciliation",
            target,
            answered_s <= RESTART_TARGET_S,
        )
    )
    report.add(
        Row(
            f"restart, {n:,} pending, {kind.label}: start -> full resolver pass",
            f"{'>' if timed_out else ''}{pass_s:.2f} s",
            f"poll_interval_s {POLL_INTERVAL_S:g}; bulk creation {bulk_rate:.0f}/s",
            target,
            pass_s <= RESTART_TARGET_S and not timed_out,
        )
    )


async def first_answers(wire: Wire, sample: list[str], start: float, timeout_s: float = 120.0) -> float:
    """Seconds from ``start`` until ``tasks/get`` answers `working` for every task of ``sample``."""
    pending = list(sample)
    while time.perf_counter() - start < timeout_s:
        try:
            while pending:
                reply = await wire.get(pending[0])
                if reply.status != 200 or reply.body.get("result", {}).get("status") != "working":
                    raise RuntimeError(f"old task {pending[0]} read back as {reply.body!r}")
                pending.pop(0)
            return time.perf_counter() - start
        except httpx.TransportError:
            await asyncio.sleep(0.01)
    raise RuntimeError(f"the restarted server did not answer within {timeout_s} s")


async def resolver_pass(db: Database, start_ms: int, start: float, timeout_s: float) -> tuple[float, bool]:
    """Seconds from ``start`` until no pending workflow has ``next_check_at <= start_ms`` (read from the DB)."""
    while time.perf_counter() - start < timeout_s:
        _, due, _ = await pending_state(db, start_ms)
        if due == 0:
            return time.perf_counter() - start, False
        await asyncio.sleep(0.05)
    return time.perf_counter() - start, True


# -- 4. creation while the pending set grows ------------------------------------------------


GROWTH_RATIO_TARGET = 0.9  # last slice's rate / first slice's rate
GROWTH_WARMUP = 20  # gated calls before the first slice (they stay pending too)


def rss_kib(pid: int) -> int:
    """The resident set size of process ``pid`` in KiB (from /proc; 0 where there is none)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used (0 where there is none)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU seconds of the server process and, on PostgreSQL, of the database's backends.

    Backends are found in ``pg_stat_activity`` at each reading and followed by pid; a backend that
    exits between two readings loses its last interval, so the database's share is a lower bound.
    On a shared machine this is steadier than the rate: another process's load delays the calls
    but hardly changes the CPU each one costs.
    """

    def __init__(self, pid: int, postgres: Postgres | None) -> None:
        self.pid, self.postgres = pid, postgres
        self.seen: dict[int, float] = {}
        self.server = self.database = 0.0

    async def read(self) -> tuple[float, float]:
        """(server, database backends) CPU seconds used so far."""
        self.server = cpu_s(self.pid)
        if self.postgres is not None:
            conn = await asyncpg.connect(self.postgres.admin_dsn, timeout=5)
            try:
                rows = await conn.fetch("SELECT pid FROM pg_stat_activity WHERE datname = $1", self.postgres.name)
            finally:
                await conn.close()
            first = not self.seen  # the first reading is the baseline; later, a new backend counts from 0
            for row in rows:
                backend = int(row["pid"])
                now = cpu_s(backend)
                self.database += max(0.0, now - self.seen.get(backend, now if first else 0.0))
                self.seen[backend] = now
        return self.server, self.database


async def bench_growth(scale: Scale, kind: DatabaseKind, report: Report) -> None:
    """Approval-gated creations with nothing cancelled: the rate per slice as the pending set grows."""
    n, size, conc = scale.growth_tasks, scale.growth_slice, scale.concurrency
    log(f"\n[4] {n:,} approval-gated creations on {kind.label}, {conc} callers, none cancelled (growing pending set)")
    async with served(kind, f"growth-{kind.label.lower()}") as srv:
        alice = srv.alice
        process = srv.server.process
        pid = process.pid if process is not None else 0
        await throughput(lambda _i: gated_call(alice), GROWTH_WARMUP, conc)  # warm-up (counted in the pending set)
        meter = CpuMeter(pid, kind.postgres)
        rates: list[float] = []
        cpu_ms: list[float] = []  # server (+ database) CPU ms per creation, per slice
        rss: dict[int, int] = {0: rss_kib(pid)}
        vacuums: list[str] = []  # "<pending>: VACUUM <table>", what the stand-in for autovacuum did
        started = time.perf_counter()
        before = sum(await meter.read())
        for done in range(0, n, size):
            rates.append(await throughput(lambda _i: gated_call(alice), size, conc))
            after = sum(await meter.read())
            cpu_ms.append((after - before) * 1000 / size)
            before = after
            log(f"  {done + size:>7,} pending: {rates[-1]:.0f}/s, {cpu_ms[-1]:.2f} CPU ms per creation")
            if (done + size) % 10_000 == 0 or done + size >= n:
                rss[done + size] = rss_kib(pid)
            if kind.postgres is not None:  # vacuum as autovacuum would, outside the slices' readings
                vacuums.extend(f"{done + size}: {work}" for work in await kind.postgres.vacuum_due())
                before = sum(await meter.read())
        overall = n / (time.perf_counter() - started)
        total, _, _ = await pending_state(srv.db, 0)
        if total != n + GROWTH_WARMUP:
            raise RuntimeError(f"expected {n + GROWTH_WARMUP} pending workflows, found {total}")
    if vacuums:
        log(f"  vacuumed between slices: {'; '.join(vacuums)}")
    ratio = rates[-1] / rates[0]
    cpu_ratio = cpu_ms[-1] / cpu_ms[0] if cpu_ms[0] else float("nan")
    per_task = (rss[max(rss)] - rss[0]) * 1024 / n
    log(
        f"  overall {overall:.0f}/s; last slice / first {ratio:.2f}; CPU per creation last / first {cpu_ratio:.2f}; "
        f"RSS KiB {rss} ({per_task:.0f} B per task)"
    )
    report.figures[f"growth_{kind.label.lower()}"] = {
        "tasks": n,
        "slice": size,
        "rates": rates,
        "cpu_ms_per_creation": cpu_ms,
        "overall_per_s": overall,
        "last_over_first": ratio,
        "cpu_last_over_first": cpu_ratio,
        "rss_kib": rss,
        "vacuums": vacuums,
    }
    report.add(
        Row(
            f"approval-gated creations, {n:,} pending, {conc} callers, {kind.label}: last / first slice",
            f"x{ratio:.2f}",
            f"first {rates[0]:.0f}/s, last {rates[-1]:.0f}/s, overall {overall:.0f}/s",
            f">= x{GROWTH_RATIO_TARGET}",
            ratio >= GROWTH_RATIO_TARGET,
        )
    )
    who = "server + database backends" if kind.postgres is not None else "server"
    report.add(
        Row(
            f"CPU per approval-gated creation, {n:,} pending, {kind.label}: last / first slice",
            f"x{cpu_ratio:.2f}",
            f"{who}: first {cpu_ms[0]:.2f} ms, last {cpu_ms[-1]:.2f} ms",
        )
    )
    report.add(
        Row(
            f"server RSS growth per pending approval, {kind.label}",
            f"{per_task:.0f} B",
            f"RSS {rss[0] // 1024} -> {rss[max(rss)] // 1024} MiB",
        )
    )


# -- main ------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> int:
    scale = QUICK if args.quick else FULL
    if args.growth_tasks:
        scale = replace(scale, growth_tasks=args.growth_tasks)
    started = time.perf_counter()
    log(f"approval benchmark ({scale.name}); python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    postgres: Postgres | None = None
    if not args.no_postgres:
        postgres = await Postgres.create_or_explain(args.postgres_url)
        if postgres is None:
            return 2
        log(f"PostgreSQL scratch database: {postgres.name}")
    report = Report("approval_bench")
    try:
        with tempfile.TemporaryDirectory(prefix="mcpa-approval-bench-") as tmp:
            workdir = Path(tmp)
            kinds = database_kinds(workdir, postgres, prefix="approval")
            figures = (FIGURES[args.only],) if args.only else tuple(FIGURES.values())
            for figure in figures:
                # --quick: the latency and restart figures on SQLite only.
                selected = kinds[:1] if args.quick and figure in (bench_latency, bench_restart) else kinds
                for kind in selected:
                    section = time.perf_counter()
                    await figure(scale, kind, report)
                    log(f"  ({time.perf_counter() - section:.1f} s)")
    finally:
        if postgres is not None:
            await postgres.drop()
    seconds = time.perf_counter() - started
    report.publish(scale, seconds, baseline_header="baseline / context", json_target=args.json)
    return 0


FIGURES = {"create": bench_creation, "latency": bench_latency, "restart": bench_restart, "growth": bench_growth}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark SEP-2848 tool approval on `mcp-approval serve`.")
    parser.add_argument("--quick", action="store_true", help="a short run for CI smoke use (under a minute)")
    add_postgres_arguments(parser)
    parser.add_argument("--only", choices=sorted(FIGURES), help="run one figure only")
    parser.add_argument("--growth-tasks", type=int, metavar="N", help="pending approvals the growth figure creates")
    parser.add_argument(
        "--json", nargs="?", const="-", metavar="PATH", help="also write the results as JSON (to stdout, or PATH)"
    )
    args = parser.parse_args(argv)
    return exit_code_of(run(args))


if __name__ == "__main__":
    sys.exit(main())
