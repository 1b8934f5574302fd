"""Benchmark of task push: ``notifications/tasks`` and change signals between workers.

Run from the repository root::

    .venv/bin/python benchmarks/notify_bench.py [--quick] [--postgres-url URL] [--no-postgres]

Figures (each against its baseline, measured in the same run; in 1 and 2 the calls interleaved):

1. completion → the client sees ``completed``: ``TasksClient`` waking on ``notifications/tasks``
   vs the same client polling at ``pollIntervalMs`` = 1 s (SQLite, PostgreSQL). The figure is the
   call's duration minus the tool's own 0.2 s.
2. ``tasks/cancel`` on worker B → the owner A has stopped the tool (its task reads ``cancelled``),
   PostgreSQL: ``LISTEN``/``NOTIFY`` signals vs heartbeat only (``poll_interval_s`` = 1 s).
3. server CPU per 1,000 waiting clients (SQLite, PostgreSQL): each client holding a
   ``subscriptions/listen`` stream for its ``working`` task vs polling ``tasks/get`` at
   ``pollIntervalMs`` = 1 s; 1,000 clients and 10 s windows (200 and 4 s with ``--quick``, the
   figure normalised per 1,000), on a server process of its own (see ``notify_cpu.py``).

The servers of figures 1 and 2 are real streamable-HTTP servers (uvicorn) on 127.0.0.1 inside this
process; two workers share one PostgreSQL database. The exit status is 0 whatever the figures are; 2 when PostgreSQL
is not reachable and ``--no-postgres`` was not given.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import uvicorn
from databases import Postgres, add_postgres_arguments
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from measure import Row, log, print_table
from notify_cpu import CPU_FULL, CPU_QUICK, figure_cpu

from mcp_approval.client import TasksClient
from mcp_approval.hosts import unused_loopback_port
from mcp_approval.tasks import TaskOptions, TasksExtension, store_from_url
from mcp_approval.tasks.signals import LocalTaskSignals
from mcp_approval.testing.tasks_demo import build_tasks_demo_server

TOOL_S = 0.2
POLL_S = 1.0
NOTIFY_TARGET_MS = 50.0
CANCEL_TARGET_MS = 100.0
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
}


@contextlib.asynccontextmanager
async def serving(db_url: str, *, cross_worker_signals: bool = True) -> AsyncIterator[tuple[str, TasksExtension]]:
    """A tasks demo server on a loopback port; yields its base URL and its extension."""
    options = TaskOptions(
        threshold_s=0.0, poll_interval_s=POLL_S, lease_grace_s=1.0, sweep_interval_s=1.0, allow_anonymous_tasks=True
    )
    port = unused_loopback_port()
    signals = None if cross_worker_signals else LocalTaskSignals()
    # The heartbeat-only baseline: each worker's signals stay in its own process.
    server, tasks = build_tasks_demo_server(options, store=store_from_url(db_url), signals=signals)
    app = server.streamable_http_app(json_response=True)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    uv = uvicorn.Server(config)
    runner = asyncio.create_task(uv.serve())
    while not uv.started:  # noqa: ASYNC110 (uvicorn offers no event for this)
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}", tasks
    finally:
        uv.should_exit = True
        await runner


async def call_latency_ms(base_url: str, *, notifications: bool) -> float:
    """One ``slow_job`` through ``TasksClient``; the wait beyond the tool's own time, in ms."""
    async with httpx2.AsyncClient(timeout=30) as http:
        transport = streamable_http_client(f"{base_url}/mcp", http_client=http)
        client_ext = TasksClient(task_wait_s=30, notifications=notifications)
        async with Client(transport, extensions=[client_ext]) as client:
            start = time.perf_counter()
            await client.call_tool("slow_job", {"seconds": TOOL_S})
            return (time.perf_counter() - start - TOOL_S) * 1000


async def figure_notify(kind: str, db_url: str, rounds: int) -> Row:
    async with serving(db_url) as (base_url, _):
        await call_latency_ms(base_url, notifications=True)  # warm-up
        pushed: list[float] = []
        polled: list[float] = []
        for i in range(rounds):
            for notify in (True, False) if i % 2 == 0 else (False, True):
                (pushed if notify else polled).append(await call_latency_ms(base_url, notifications=notify))
    p50, base = statistics.median(pushed), statistics.median(polled)
    log(f"{kind}: notifications p50 {p50:.1f} ms, polling p50 {base:.1f} ms")
    return Row(
        f"completion → client sees it, {kind} (p50)",
        f"{p50:.1f} ms",
        f"{base:.1f} ms polling at 1 s (x{base / max(p50, 0.001):.0f})",
        f"≤ {NOTIFY_TARGET_MS:.0f} ms",
        p50 <= NOTIFY_TARGET_MS,
    )


async def rpc(http: httpx.AsyncClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    headers = {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": method,
    }
    name = params.get("taskId", params.get("name"))
    if isinstance(name, str):
        headers["mcp-name"] = name
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": ENVELOPE}}
    response = await http.post("/mcp", content=json.dumps(body), headers=headers)
    return dict(response.json()["result"])


async def cancel_ms(a_url: str, b_url: str, owner: TasksExtension) -> float:
    """Start a long tool on A, cancel it through B; ms until A's task reads ``cancelled``."""
    async with httpx.AsyncClient(base_url=a_url, timeout=10) as on_a, httpx.AsyncClient(base_url=b_url) as on_b:
        task_id = (await rpc(on_a, "tools/call", {"name": "slow_job", "arguments": {"seconds": 60}}))["taskId"]
        while (execution := owner.runtime.local(task_id)) is None or not execution.running:  # noqa: ASYNC110
            await asyncio.sleep(0.005)
        start = time.perf_counter()
        await rpc(on_b, "tasks/cancel", {"taskId": task_id})
        while owner.runtime.local(task_id) is not None:  # noqa: ASYNC110 (released once cancelled is written)
            await asyncio.sleep(0.001)
        return (time.perf_counter() - start) * 1000


async def figure_cancel(postgres: Postgres, rounds: int) -> Row:
    results: dict[bool, list[float]] = {True: [], False: []}
    for signals in (True, False):
        await postgres.reset()
        async with (
            serving(postgres.url, cross_worker_signals=signals) as (a_url, a_tasks),
            serving(postgres.url, cross_worker_signals=signals) as (b_url, _),
        ):
            await cancel_ms(a_url, b_url, a_tasks)  # warm-up
            for _ in range(rounds):
                results[signals].append(await cancel_ms(a_url, b_url, a_tasks))
    p50, base = statistics.median(results[True]), statistics.median(results[False])
    log(f"cancel on B → A stops: signals p50 {p50:.1f} ms, heartbeat only p50 {base:.1f} ms")
    return Row(
        "cancel on B → owner A stops the tool, PostgreSQL (p50)",
        f"{p50:.1f} ms",
        f"{base:.1f} ms heartbeat only (x{base / max(p50, 0.001):.0f})",
        f"≤ {CANCEL_TARGET_MS:.0f} ms",
        p50 <= CANCEL_TARGET_MS,
    )


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    add_postgres_arguments(parser)
    args = parser.parse_args(argv)
    rounds = 3 if args.quick else 10
    cpu_scale = CPU_QUICK if args.quick else CPU_FULL
    postgres = None if args.no_postgres else await Postgres.create_or_explain(args.postgres_url)
    if postgres is None and not args.no_postgres:
        return 2
    rows: list[Row] = []
    try:
        with tempfile.TemporaryDirectory() as workdir:
            rows.append(await figure_notify("SQLite", f"sqlite:///{Path(workdir) / 'tasks.db'}", rounds))
            rows.append(await figure_cpu("SQLite", f"sqlite:///{Path(workdir) / 'cpu.db'}", cpu_scale))
        if postgres is not None:
            rows.append(await figure_notify("PostgreSQL", postgres.url, rounds))
            rows.append(await figure_cancel(postgres, rounds))
            await postgres.reset()
            rows.append(await figure_cpu("PostgreSQL", postgres.url, cpu_scale, postgres))
    finally:
        if postgres is not None:
            await postgres.drop()
    print()
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
