"""Benchmark of the SEP-2663 tasks runtime (``mcp_approval.tasks``).

Run from the repository root::

    .venv/bin/python benchmarks/tasks_bench.py [--quick] [--postgres-url URL] [--no-postgres]

Every figure is measured in the same run as its baseline, after a warm-up, over several
rounds; the median of the rounds is reported. The final table lists each figure with its
target and PASS/MISS (INFO where the figure has no target). The exit status is 0 whatever
the figures are, and non-zero only when the benchmark itself fails (2: PostgreSQL not
reachable and ``--no-postgres`` not given; 1: any other error).

Transport: the in-process ``mcp.Client(server)`` (the SDK's direct 2026-07-28 dispatcher, no
JSON-RPC framing, no HTTP), for the server with the tasks extension and for the plain
``MCPServer`` baseline alike; the latency figure is also measured over streamable HTTP (an
in-process ASGI transport), which is how a deployed server is reached.
See benchmarks/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from databases import DatabaseKind, Postgres, add_postgres_arguments, database_kinds
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from measure import Report, Row, exit_code_of, log, median, paired_calls, settle, throughput, timed_calls

from mcp_approval.client import CreateTaskResult, TasksClient
from mcp_approval.tasks import NewTask, SqlTaskStore, TaskMode, TaskOptions, TasksExtension, TaskStatus, store_from_url
from mcp_approval.tasks.models import new_task_id, principal_digest
from mcp_approval.tasks.server import LOCAL_PRINCIPAL
from mcp_approval.testing import tasks_demo
from mcp_approval.testing.tasks_demo import build_tasks_demo_server

MODES = {"echo": TaskMode.FORBIDDEN, "required_job": TaskMode.REQUIRED}  # slow_job: optional (the default)
THRESHOLD_S = 5.0

LATENCY_RATIO_TARGET = 1.10
SQLITE_CREATE_TARGET = 300.0
GET_TARGET = 1_000.0
RSS_BATCH = 10_000
RSS_WARMUP = 200


# -- configuration ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Scale:
    """How much work each figure does; ``--quick`` scales it down for CI smoke runs."""

    name: str
    rounds: int  # rounds of the throughput figures
    latency_rounds: int
    latency_warmup: int
    latency_calls: int  # per subject per round, interleaved call by call with the other subject
    create_warmup: int
    create_calls: int  # per mode per round
    get_warmup: int
    get_calls: int  # per mode per round
    rss_tasks: int  # first batch (the second is half as big); figures are scaled to 10,000
    concurrency: int


FULL = Scale(
    name="full",
    rounds=5,
    latency_rounds=7,
    latency_warmup=300,
    latency_calls=600,
    create_warmup=100,
    create_calls=150,
    get_warmup=200,
    get_calls=400,
    rss_tasks=RSS_BATCH,
    concurrency=8,
)
QUICK = Scale(
    name="quick",
    rounds=3,
    latency_rounds=3,
    latency_warmup=60,
    latency_calls=120,
    create_warmup=20,
    create_calls=40,
    get_warmup=40,
    get_calls=120,
    rss_tasks=500,
    concurrency=8,
)


# -- results ---------------------------------------------------------------------------------


def rss_mib() -> float:
    """This process's resident set size (VmRSS) in MiB."""
    for text in Path("/proc/self/status").read_text().splitlines():
        if text.startswith("VmRSS:"):
            return int(text.split()[1]) / 1024
    raise RuntimeError("VmRSS not found in /proc/self/status")


# -- servers and databases -------------------------------------------------------------------


def tasks_options() -> TaskOptions:
    return TaskOptions(threshold_s=THRESHOLD_S, modes=MODES)


def plain_server() -> MCPServer[Any]:
    """The baseline: an ``MCPServer`` with exactly the demo's tools and no extension, middleware or lifespan."""
    server: MCPServer[Any] = MCPServer("mcp-approval-tasks-demo")
    tasks_demo._register_tools(server)  # the very same tool functions as the tasks demo server
    return server


def tasks_client() -> TasksClient:
    # Never polls in this benchmark: REQUIRED calls are read with allow_claimed=True.
    return TasksClient(task_wait_s=30.0)


@asynccontextmanager
async def tasks_server(store_url: str) -> AsyncIterator[tuple[Client, TasksClient, TasksExtension]]:
    """The tasks demo server on ``store_url`` with a client that declares the tasks extension."""
    server, extension = build_tasks_demo_server(tasks_options(), store=store_from_url(store_url))
    client_extension = tasks_client()
    async with Client(server, extensions=[client_extension]) as client:
        yield client, client_extension, extension


_OPTIONS = tasks_options()
_LOCAL_DIGEST = principal_digest(LOCAL_PRINCIPAL)


def completed_task(tool_name: str) -> NewTask:
    """A row like the one the extension writes for a REQUIRED call that finished at once."""
    return NewTask(
        task_id=new_task_id(),
        principal_digest=_LOCAL_DIGEST,
        tool_name=tool_name,
        ttl_ms=_OPTIONS.ttl_ms,
        poll_interval_ms=_OPTIONS.poll_interval_ms,
        owner=None,
        lease_ms=None,
        status=TaskStatus.COMPLETED,
        result={
            "content": [{"type": "text", "text": "job done"}],
            "structuredContent": {"result": "job done"},
            "isError": False,
            "resultType": "complete",
        },
    )


# -- 1. tools/call latency -------------------------------------------------------------------


@dataclass
class LatencyStats:
    means_us: list[float] = field(default_factory=list)
    p50s_us: list[float] = field(default_factory=list)

    def add(self, samples_ns: Sequence[int]) -> None:
        self.means_us.append(statistics.fmean(samples_ns) / 1000)
        self.p50s_us.append(statistics.median(samples_ns) / 1000)


@asynccontextmanager
async def connected(server: MCPServer[Any], transport: str) -> AsyncIterator[Client]:
    """A client declaring the tasks extension, over ``transport`` ("in-process" or "http")."""
    if transport == "in-process":
        async with Client(server, extensions=[tasks_client()]) as client:
            yield client
        return
    app = server.streamable_http_app(json_response=True)
    async with server.session_manager.run():
        http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1:8000")
        stream = streamable_http_client("http://127.0.0.1:8000/mcp", http_client=http)
        async with Client(stream, extensions=[tasks_client()]) as client:
            yield client


TRANSPORTS = {
    "in-process": "in-process mcp.Client (no framing, no HTTP)",
    "http": "streamable HTTP over an in-process ASGI transport",
}


async def bench_latency(scale: Scale, workdir: Path, report: Report, transport: str) -> float:
    """Figure 1; returns the plain server's ``echo`` calls/s (context for the throughput figures)."""
    log(f"\n[1] tools/call latency: tasks extension vs. plain MCPServer ({TRANSPORTS[transport]}, both)")
    cases: dict[str, tuple[str, dict[str, Any]]] = {
        "forbidden `echo`": ("echo", {"text": "hello"}),
        "optional `slow_job(seconds=0)`": ("slow_job", {"seconds": 0, "label": "bench"}),
    }
    ext_server, _ = build_tasks_demo_server(
        tasks_options(), store=store_from_url(f"sqlite:///{workdir / f'latency-{transport}.db'}")
    )
    async with connected(ext_server, transport) as ext_client, connected(plain_server(), transport) as plain_client:
        clients = {"ext": ext_client, "plain": plain_client}
        stats = {(case, side): LatencyStats() for case in cases for side in clients}
        ratios_mean: dict[str, list[float]] = {case: [] for case in cases}
        ratios_p50: dict[str, list[float]] = {case: [] for case in cases}

        def caller(side: str, tool: str, args: dict[str, Any]) -> Callable[[], Awaitable[object]]:
            client = clients[side]

            async def call() -> None:
                result = await client.call_tool(tool, args)
                if result.is_error or result.result_type != "complete":
                    raise RuntimeError(f"{side} {tool}: unexpected result {result!r}")

            return call

        for tool, args in cases.values():
            for side in clients:
                await timed_calls(caller(side, tool, args), scale.latency_warmup)
        for _round in range(scale.latency_rounds):
            for case, (tool, args) in cases.items():
                settle()
                ext_samples, plain_samples = await paired_calls(
                    caller("ext", tool, args), caller("plain", tool, args), scale.latency_calls
                )
                ext, plain = stats[case, "ext"], stats[case, "plain"]
                ext.add(ext_samples)
                plain.add(plain_samples)
                ratios_mean[case].append(ext.means_us[-1] / plain.means_us[-1])
                ratios_p50[case].append(ext.p50s_us[-1] / plain.p50s_us[-1])

    plain_rate = 0.0
    for case in cases:
        ext, plain = stats[case, "ext"], stats[case, "plain"]
        ext_mean, ext_p50 = median(ext.means_us), median(ext.p50s_us)
        plain_mean, plain_p50 = median(plain.means_us), median(plain.p50s_us)
        ratio_mean, ratio_p50 = median(ratios_mean[case]), median(ratios_p50[case])
        if case.startswith("forbidden"):
            plain_rate = 1e6 / plain_mean
        log(
            f"  {case}: ext mean {ext_mean:.1f} µs p50 {ext_p50:.1f} µs | plain mean {plain_mean:.1f} µs "
            f"p50 {plain_p50:.1f} µs | ratio mean {ratio_mean:.3f} p50 {ratio_p50:.3f} "
            f"(rounds: {', '.join(f'{r:.3f}' for r in ratios_mean[case])})"
        )
        target = f"<= {LATENCY_RATIO_TARGET:.2f}"
        report.add(
            Row(
                f"tools/call {case} [{transport}]: ext/plain mean",
                f"{ratio_mean:.3f}x ({ext_mean:.0f} us)",
                f"plain {plain_mean:.0f} us",
                target,
                ratio_mean <= LATENCY_RATIO_TARGET,
            )
        )
        report.add(
            Row(
                f"tools/call {case} [{transport}]: ext/plain p50",
                f"{ratio_p50:.3f}x ({ext_p50:.0f} us)",
                f"plain {plain_p50:.0f} us",
                target,
                ratio_p50 <= LATENCY_RATIO_TARGET,
            )
        )
    return plain_rate


# -- 2 and 3. task creations and tasks/get per second ----------------------------------------


async def bench_store_throughput(scale: Scale, db: DatabaseKind, report: Report, plain_rate: float) -> None:
    """Figures 2 and 3 on one database, with store-direct and plain-transport baselines."""
    log(f"\n[2,3] task creations/s and tasks/get/s on {db.label} (through the extension)")
    conc = scale.concurrency
    async with tasks_server(await db.fresh()) as (client, client_ext, extension):
        store = extension.store
        created: list[str] = []

        async def create_via_extension(_i: int) -> None:
            result = await client.session.call_tool("required_job", {"label": "bench"}, allow_claimed=True)
            if not isinstance(result, CreateTaskResult):
                raise RuntimeError(f"required_job answered without a task: {result!r}")
            created.append(result.task_id)

        async def create_direct(_i: int) -> None:
            await store.create(completed_task("required_job"))

        # Warm-up: also fills the pool with connections for the concurrent callers.
        await throughput(create_via_extension, scale.create_warmup, conc)
        await throughput(create_direct, scale.create_warmup, conc)
        rates: dict[str, list[float]] = {"ext seq": [], f"ext x{conc}": [], "store seq": [], f"store x{conc}": []}
        plans: list[tuple[str, Callable[[int], Awaitable[None]], int]] = [
            ("ext seq", create_via_extension, 1),
            (f"ext x{conc}", create_via_extension, conc),
            ("store seq", create_direct, 1),
            (f"store x{conc}", create_direct, conc),
        ]
        for round_no in range(scale.rounds):
            for name, op, callers in plans if round_no % 2 == 0 else reversed(plans):
                settle()
                rates[name].append(await throughput(op, scale.create_calls, callers))
        create = {name: median(values) for name, values in rates.items()}
        log("  creations/s: " + ", ".join(f"{name} {rate:.0f}" for name, rate in create.items()))

        ids = created[-1000:]
        if not ids:
            raise RuntimeError("no task was created")

        async def get_via_extension(i: int) -> None:
            task = await client_ext.get(client.session, ids[i % len(ids)])
            if task.status != "completed":
                raise RuntimeError(f"unexpected task status {task.status}")

        async def get_direct(i: int) -> None:
            if await store.get(ids[i % len(ids)]) is None:
                raise RuntimeError("task not found")

        await throughput(get_via_extension, scale.get_warmup, conc)
        await throughput(get_direct, scale.get_warmup, conc)
        rates = {"ext seq": [], f"ext x{conc}": [], "store seq": [], f"store x{conc}": []}
        plans = [
            ("ext seq", get_via_extension, 1),
            (f"ext x{conc}", get_via_extension, conc),
            ("store seq", get_direct, 1),
            (f"store x{conc}", get_direct, conc),
        ]
        for round_no in range(scale.rounds):
            for name, op, callers in plans if round_no % 2 == 0 else reversed(plans):
                settle()
                rates[name].append(await throughput(op, scale.get_calls, callers))
        get = {name: median(values) for name, values in rates.items()}
        log("  tasks/get/s: " + ", ".join(f"{name} {rate:.0f}" for name, rate in get.items()))

    sqlite = db.postgres is None
    modes = (("sequential", "seq"), (f"{conc} concurrent", f"x{conc}"))
    for mode, key in modes:
        value = create[f"ext {key}"]
        report.add(
            Row(
                f"task creations/s, {db.label}, {mode}",
                f"{value:.0f}/s",
                f"store.create {create[f'store {key}']:.0f}/s; plain call {plain_rate:.0f}/s",
                f">= {SQLITE_CREATE_TARGET:.0f}/s" if sqlite else "-",
                value >= SQLITE_CREATE_TARGET if sqlite else None,
            )
        )
    for mode, key in modes:
        value = get[f"ext {key}"]
        report.add(
            Row(
                f"tasks/get/s, {db.label}, {mode}",
                f"{value:.0f}/s",
                f"store.get {get[f'store {key}']:.0f}/s; plain call {plain_rate:.0f}/s",
                f">= {GET_TARGET:.0f}/s",
                value >= GET_TARGET,
            )
        )


# -- 4. memory per stored task ---------------------------------------------------------------


async def rss_child(url: str, batch: int, concurrency: int) -> dict[str, Any]:
    """Figure 4's measurement, in a fresh process: store a batch of tasks and then half as many
    again, reading RSS around each; growth is reported in MiB per 10,000 tasks."""
    store = SqlTaskStore(url)
    await store.open()
    try:

        async def create(_i: int) -> None:
            await store.create(completed_task("required_job"))

        await throughput(create, RSS_WARMUP, concurrency)  # pool connections, compiled statements
        settle()
        baseline = rss_mib()
        growth: list[float] = []  # MiB per RSS_BATCH tasks
        rates: list[float] = []
        for size in (batch, batch // 2):
            settle()
            before = rss_mib()
            rates.append(await throughput(create, size, concurrency))
            settle()
            growth.append((rss_mib() - before) * RSS_BATCH / size)
    finally:
        await store.close()
    return {"baseline_mib": baseline, "growth_mib": growth, "rates": rates}


async def bench_rss(scale: Scale, db: DatabaseKind, report: Report) -> None:
    """Figure 4: RSS growth of a fresh process storing tasks through ``SqlTaskStore.create``."""
    batch = scale.rss_tasks
    log(
        f"\n[4] RSS growth per {RSS_BATCH:,} stored tasks on {db.label} "
        f"(batches of {batch:,} then {batch // 2:,} tasks, fresh process)"
    )
    url = await db.fresh()
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--rss-child",
        url,
        str(batch),
        str(scale.concurrency),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await child.communicate()
    if child.returncode != 0:
        raise RuntimeError(f"the RSS measuring process failed with exit status {child.returncode}")
    measured = json.loads(out.decode().strip().splitlines()[-1])
    growth: list[float] = measured["growth_mib"]
    stored = RSS_WARMUP + batch + batch // 2
    if db.postgres is None:
        main_bytes, wal_bytes = db.sqlite_bytes(url)
        size = f"db {main_bytes / 2**20:.2f} MiB + WAL {wal_bytes / 2**20:.2f} MiB"
        total = main_bytes + wal_bytes
    else:
        total = await db.postgres.table_bytes()
        size = f"table+indexes {total / 2**20:.2f} MiB"
    log(
        f"  RSS {measured['baseline_mib']:.1f} MiB after warm-up; growth: first batch {growth[0]:+.2f} MiB/10k, "
        f"next batch {growth[1]:+.2f} MiB/10k (store.create x{scale.concurrency}: {median(measured['rates']):.0f}/s); "
        f"{size} for {stored:,} tasks"
    )
    scaled = "" if batch == RSS_BATCH else f" (scaled from {batch:,})"
    report.add(
        Row(
            f"RSS growth per 10k tasks, {db.label}",
            f"{growth[0]:+.2f} MiB{scaled}",
            f"then {growth[1]:+.2f} MiB/10k; RSS {measured['baseline_mib']:.0f} MiB before",
        )
    )
    report.add(
        Row(
            f"storage for {stored:,} tasks, {db.label}",
            f"{total / 2**20:.2f} MiB",
            f"{total / stored:.0f} B/task; {size}",
        )
    )


# -- main ------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> int:
    scale = QUICK if args.quick else FULL
    started = time.perf_counter()
    log(
        f"tasks benchmark ({scale.name}): {scale.rounds} rounds, median reported; python {sys.version.split()[0]}, "
        f"{os.cpu_count()} CPUs, pid {os.getpid()}"
    )
    postgres: Postgres | None = None
    if not args.no_postgres:
        postgres = await Postgres.create_or_explain(args.postgres_url)
        if postgres is None:
            return 2
        log(f"PostgreSQL scratch database: {postgres.name}")
    report = Report("tasks_bench")
    try:
        with tempfile.TemporaryDirectory(prefix="mcpa-bench-") as tmp:
            workdir = Path(tmp)
            databases = database_kinds(workdir, postgres, prefix="tasks")
            section = time.perf_counter()
            plain_rate = await bench_latency(scale, workdir, report, "in-process")
            await bench_latency(scale, workdir, report, "http")
            log(f"  ({time.perf_counter() - section:.1f} s)")
            for db in databases:
                section = time.perf_counter()
                await bench_store_throughput(scale, db, report, plain_rate)
                log(f"  ({time.perf_counter() - section:.1f} s)")
            for db in databases:
                section = time.perf_counter()
                await bench_rss(scale, db, report)
                log(f"  ({time.perf_counter() - section:.1f} s)")
    finally:
        if postgres is not None:
            await postgres.drop()
    report.publish(scale, time.perf_counter() - started, baseline_header="baseline / context", json_target=args.json)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark the mcp_approval tasks runtime.")
    parser.add_argument("--quick", action="store_true", help="a short run for CI smoke use (about 30 s)")
    add_postgres_arguments(parser)
    parser.add_argument(
        "--json", nargs="?", const="-", metavar="PATH", help="also write the results as JSON (to stdout, or PATH)"
    )
    parser.add_argument("--rss-child", nargs=3, metavar=("URL", "BATCH", "CONCURRENCY"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rss_child:  # internal: figure 4 runs in a fresh process
        url, batch, concurrency = args.rss_child
        print(json.dumps(asyncio.run(rss_child(url, int(batch), int(concurrency)))))
        return 0
    return exit_code_of(run(args))


if __name__ == "__main__":
    sys.exit(main())
