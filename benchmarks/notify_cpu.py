"""Server CPU per 1,000 waiting clients: ``notifications/tasks`` listeners vs ``tasks/get`` pollers.

One tasks demo server runs as a process of its own (``python -m mcp_approval.testing.tasks_demo``,
``--poll-interval 1.0``, so each task's ``pollIntervalMs`` is 1000). N tasks are created (``slow_job``
of an hour: each stays ``working``), then three windows of the server's CPU time (utime + stime
from ``/proc/<pid>/stat``) are taken: the tasks alone (no client), N clients polling ``tasks/get`` at
``pollIntervalMs``, and N clients each holding a ``subscriptions/listen`` stream for its task. Each
client has its own keep-alive connection and speaks raw HTTP/1.1 (pre-built requests, no JSON
encoding per call), so the client process stays light; its own CPU is printed beside, and a warning
is printed when it is high enough to slow the server down. On PostgreSQL the CPU of the database's
backends serving the server is printed beside as well; the table's figure is the server process's.
When the server cannot answer every poll that is due (one process saturates), the polling figure
is marked as a lower bound.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
from databases import Postgres
from measure import Row, log, throughput
from peers import CONNECTIONS, create_task, mcp_approval_subject, running

from mcp_approval.checks.wire import PROTOCOL, Wire, envelope

POLL_INTERVAL_S = 1.0  # the demo's --poll-interval: pollIntervalMs = 1000 (the product default is 2 s)
CLIENT_CPU_WARN = 0.5  # client CPU-s/s above this may starve the server on a 2-core machine
OPEN_CONCURRENCY = 32  # connections opened at once, to stay well inside the listen backlog
_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuScale:
    """How many waiting clients, and how long each CPU window lasts."""

    clients: int
    window_s: float


CPU_FULL = CpuScale(1_000, 10.0)
CPU_QUICK = CpuScale(200, 4.0)


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads), from ``/proc/<pid>/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime: fields 14 and 15 of stat(5)


def http_request(port: int, method: str, body: bytes, name: str | None = None) -> bytes:
    """A complete HTTP/1.1 POST to ``/mcp`` carrying the 2026-07-28 routing headers."""
    routing = f"mcp-name: {name}\r\n" if name else ""
    head = (
        f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"accept: application/json, text/event-stream\r\nmcp-protocol-version: {PROTOCOL}\r\n"
        f"mcp-method: {method}\r\n{routing}content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def rpc_body(method: str, params: dict[str, object]) -> bytes:
    """A JSON-RPC request body with the client envelope."""
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": envelope()}}).encode()


async def read_response(reader: asyncio.StreamReader) -> bytes:
    """One ``application/json`` response with a content length; its body."""
    status = await reader.readline()
    length = -1
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if not status.startswith(b"HTTP/1.1 200") or length < 0:
        raise RuntimeError(f"unexpected response: {status!r} (content-length {length})")
    return await reader.readexactly(length)


@dataclass
class Clients:
    """N waiting clients of one kind, each on its own connection, and what they did."""

    port: int
    task_ids: list[str]
    requests: int = 0  # tasks/get answered (polling)
    frames: int = 0  # notifications/tasks received (listening)
    opening: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(OPEN_CONCURRENCY))

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A new connection to the server (a few opened at a time)."""
        async with self.opening:
            return await asyncio.open_connection("127.0.0.1", self.port)

    async def poll(self, task_id: str, ready: asyncio.Event) -> None:
        """``tasks/get`` every ``POLL_INTERVAL_S``, at a random phase, on a keep-alive connection."""
        reader, writer = await self.connect()
        request = http_request(self.port, "tasks/get", rpc_body("tasks/get", {"taskId": task_id}), task_id)
        try:
            await ready.wait()
            await asyncio.sleep(random.uniform(0, POLL_INTERVAL_S))
            next_at = time.monotonic()
            while True:
                writer.write(request)
                if b'"working"' not in await read_response(reader):
                    raise RuntimeError(f"task {task_id} is no longer working")
                self.requests += 1
                next_at += POLL_INTERVAL_S
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        finally:
            writer.close()

    async def listen(self, task_id: str, established: Callable[[], None]) -> None:
        """Hold a ``subscriptions/listen`` stream for ``task_id``; reports once its first task frame came."""
        reader, writer = await self.connect()
        params: dict[str, object] = {"notifications": {"taskIds": [task_id]}}
        writer.write(http_request(self.port, "subscriptions/listen", rpc_body("subscriptions/listen", params)))
        try:
            status = await reader.readline()
            if not status.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"listen for {task_id} refused: {status!r}")
            seen_first = False
            while line := await reader.readline():
                if line.startswith(b"data:") and b"notifications/tasks" in line:
                    self.frames += 1
                    if not seen_first:
                        seen_first = True
                        established()
            raise RuntimeError(f"the listen stream for {task_id} ended")
        finally:
            writer.close()


@dataclass(frozen=True)
class Window:
    """CPU-s/s over one window: the server, this (client) process, the database backends (if any)."""

    server: float
    client: float
    database: float | None


@dataclass
class Meter:
    """Takes CPU windows of the server process and, on PostgreSQL, of the database's backends."""

    pid: int
    window_s: float
    postgres: Postgres | None = None

    async def window(self) -> Window:
        """CPU-s/s over ``window_s``."""
        backends = BackendSampler(self.postgres) if self.postgres is not None else None
        sampling = asyncio.create_task(backends.run()) if backends is not None else None
        server0, client0, start = process_cpu_s(self.pid), time.process_time(), time.monotonic()
        await asyncio.sleep(self.window_s)
        elapsed = time.monotonic() - start
        server, client = process_cpu_s(self.pid) - server0, time.process_time() - client0
        database = None
        if backends is not None and sampling is not None:
            sampling.cancel()
            await asyncio.gather(sampling, return_exceptions=True)
            database = backends.cpu_s() / elapsed
        return Window(server / elapsed, client / elapsed, database)


@dataclass
class BackendSampler:
    """CPU of the PostgreSQL backends serving the scratch database, sampled every 0.1 s.

    The server's pools open and close overflow connections under load, so the backends are looked
    up throughout the window; each one counts from when it is first seen to when it is last seen
    (what a backend spends before its first sample is missed: the figure is a lower bound).
    """

    postgres: Postgres
    first: dict[int, float] = field(default_factory=dict)
    last: dict[int, float] = field(default_factory=dict)

    async def run(self) -> None:
        """Sample until cancelled."""
        conn = await asyncpg.connect(self.postgres.url, timeout=5)
        try:
            own = conn.get_server_pid()
            while True:
                rows = await conn.fetch("SELECT pid FROM pg_stat_activity WHERE datname = $1", self.postgres.name)
                for pid in (int(row["pid"]) for row in rows if row["pid"] != own):
                    if (cpu := _cpu_or_none(pid)) is not None:
                        self.first.setdefault(pid, cpu)
                        self.last[pid] = cpu
                await asyncio.sleep(0.1)
        finally:
            await conn.close()

    def cpu_s(self) -> float:
        """CPU seconds the sampled backends spent between their first and last samples."""
        for pid in self.last:  # a final reading for backends still alive
            if (cpu := _cpu_or_none(pid)) is not None:
                self.last[pid] = cpu
        return sum(self.last[pid] - self.first[pid] for pid in self.last)


def _cpu_or_none(pid: int) -> float | None:
    try:
        return process_cpu_s(pid)
    except OSError:  # the process ended
        return None


async def gathered(workers: list[Awaitable[None]], measure: Callable[[], Awaitable[Window]]) -> Window:
    """Run ``workers`` while ``measure`` runs; a worker failing fails the measurement; all stopped after."""
    tasks = [asyncio.ensure_future(worker) for worker in workers]
    measuring = asyncio.ensure_future(measure())
    try:
        done, _ = await asyncio.wait([measuring, *tasks], return_when=asyncio.FIRST_COMPLETED)
        if measuring not in done:
            for task in done:
                task.result()  # raises what stopped the worker
            raise RuntimeError("a waiting client stopped early")
        return measuring.result()
    finally:
        for task in [measuring, *tasks]:
            task.cancel()
        await asyncio.gather(measuring, *tasks, return_exceptions=True)


async def measure_polling(meter: Meter, clients: Clients) -> tuple[Window, float]:
    """The CPU window with every client polling, and the ``tasks/get`` answered per s in it."""
    ready = asyncio.Event()
    rate: list[float] = []

    async def measure() -> Window:
        ready.set()
        await asyncio.sleep(2 * POLL_INTERVAL_S)  # every client has polled at least once
        before, start = clients.requests, time.monotonic()
        window = await meter.window()
        rate.append((clients.requests - before) / (time.monotonic() - start))
        return window

    window = await gathered([clients.poll(task_id, ready) for task_id in clients.task_ids], measure)
    return window, rate[0]


async def measure_listening(meter: Meter, clients: Clients) -> Window:
    """The CPU window with every client holding an acknowledged listen stream."""
    everyone = asyncio.Event()
    count = 0

    def established() -> None:
        nonlocal count
        count += 1
        if count == len(clients.task_ids):
            everyone.set()

    async def measure() -> Window:
        async with asyncio.timeout(120):
            await everyone.wait()
        await asyncio.sleep(1.0)  # let the last acknowledgements settle
        return await meter.window()

    return await gathered([clients.listen(task_id, established) for task_id in clients.task_ids], measure)


async def figure_cpu(kind: str, db_url: str, scale: CpuScale, postgres: Postgres | None = None) -> Row:
    """The CPU figure for one store: per 1,000 waiting clients, listening vs polling."""
    subject = mcp_approval_subject(f"mcp-approval {kind}", db_url)
    async with running(subject) as http:
        assert subject.process is not None
        meter = Meter(subject.process.pid, scale.window_s, postgres)
        wire = Wire(http)
        task_ids: list[str] = []

        async def create(_i: int) -> None:
            task_ids.append(await create_task(wire))

        await throughput(create, scale.clients, CONNECTIONS)
        idle = await meter.window()
        listening = await measure_listening(meter, Clients(subject.port, task_ids))
        polling, rate = await measure_polling(meter, Clients(subject.port, task_ids))
    return report(kind, scale, idle, listening, polling, rate)


def report(kind: str, scale: CpuScale, idle: Window, listening: Window, polling: Window, rate: float) -> Row:
    """Log the windows and warnings; the table row (server CPU only)."""
    n, per_k = scale.clients, 1000 / scale.clients
    tick = per_k / _TICKS / scale.window_s
    log(
        f"{kind}: {n} waiting tasks, windows of {scale.window_s:.0f} s; server CPU-s/s per 1,000 (resolution "
        f"{tick:.3f}): tasks alone {idle.server * per_k:.3f}, listening {listening.server * per_k:.3f}, polling "
        f"at {POLL_INTERVAL_S:.0f} s {polling.server * per_k:.3f} "
        f"({rate:.0f} tasks/get/s of {n / POLL_INTERVAL_S:.0f} due)"
    )
    if polling.database is not None and listening.database is not None and idle.database is not None:
        log(
            f"{kind}: PostgreSQL backends' CPU-s/s per 1,000 (a lower bound, not in the figure): tasks alone "
            f"{idle.database * per_k:.3f}, listening {listening.database * per_k:.3f}, "
            f"polling {polling.database * per_k:.3f}"
        )
    log(f"{kind}: client CPU-s/s (not counted): listening {listening.client:.3f}, polling {polling.client:.3f}")
    if max(listening.client, polling.client) > CLIENT_CPU_WARN:
        log(f"{kind}: warning: the client used over {CLIENT_CPU_WARN} CPU-s/s; on a small machine it competes")
    ratio = polling.server / max(listening.server, 1 / _TICKS / scale.window_s)
    baseline = f"{polling.server * per_k:.3f} CPU-s/s polling at {POLL_INTERVAL_S:.0f} s (x{ratio:.0f})"
    if rate < 0.9 * n / POLL_INTERVAL_S:  # the server, or the machine under it, could not keep up
        due_scaled = polling.server * per_k * (n / POLL_INTERVAL_S) / max(rate, 1e-6)
        log(
            f"{kind}: warning: polling fell behind its interval (the server, or the machine it shares, could not "
            f"keep up); the measured figure is a lower bound; per poll answered, scaled to every poll due: "
            f"{due_scaled:.3f} CPU-s/s per 1,000"
        )
        scaled_ratio = due_scaled / max(listening.server * per_k, per_k / _TICKS / scale.window_s)
        baseline = (
            f"≥{polling.server * per_k:.3f} CPU-s/s polling at {POLL_INTERVAL_S:.0f} s (x≥{ratio:.0f}; "
            f"{due_scaled:.3f}, x{scaled_ratio:.0f}, scaled to every poll due)"
        )
    measured = f"{listening.server * per_k:.3f} CPU-s/s notifications"
    return Row(f"server CPU per 1,000 waiting clients, {kind}", measured, baseline)
