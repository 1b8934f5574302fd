"""Side by side: plain ``mcp``, mcp-approval on each store, and FastMCP with background tasks.

Run from the repository root::

    .venv/bin/python benchmarks/peers.py [--quick] [--growth N] [--only-growth] [--no-postgres] [--no-redis]

Every subject is a server process of its own on 127.0.0.1 (one uvicorn worker), measured in
one run by the same client: raw JSON-RPC over keep-alive HTTP, 8 connections. Figures:

* sync ``echo`` calls/s: the plain ``mcp`` ``MCPServer`` against the tasks demo server
  (``mcp_approval.testing.tasks_demo``, ``echo`` in ``forbidden`` mode) on each store;
* task creations/s (``slow_job`` promoted to a task at once; each stays ``working``) and
  ``tasks/get``/s on each store;
* growth (``--growth N``): N live tasks created on each store, the rate per slice of 1,000
  (last over first, target >= 0.9) and the server's RSS per 10,000; then the idle server's CPU
  with those N tasks live (from ``/proc/<pid>/stat`` over ``--idle-s`` seconds, target <= 1%).

FastMCP with its tasks extra is installed into a virtual environment of its own (under
``~/.cache/mcp-approval-bench``); when that cannot be done, or its server does not answer, its
column is skipped with a message saying why. Ratios are printed against the plain server.
The exit status is 0 whatever the figures are, 1 when the benchmark itself fails.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # for tests.support

import httpx  # noqa: E402
from databases import DEFAULT_POSTGRES_URL, Postgres  # noqa: E402
from measure import exit_code_of, log, throughput  # noqa: E402

from mcp_approval.checks.wire import Reply, Wire  # noqa: E402
from mcp_approval.hosts import unused_loopback_port  # noqa: E402

CONNECTIONS = 8
REDIS_URL = os.environ.get("MCP_APPROVAL_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
PEER_VENV = Path.home() / ".cache" / "mcp-approval-bench" / "fastmcp-tasks"
PEER_PACKAGE = "fastmcp[tasks]"
LIVE_JOB_S = 3600.0  # a created task stays `working` for the whole run


@dataclass(frozen=True)
class Scale:
    """How much each figure does; ``--quick`` keeps the CI run under two minutes."""

    name: str
    calls: int  # sync calls per subject
    creations: int  # task creations per store
    gets: int  # tasks/get per store
    growth: int  # live tasks the growth figure creates per store (0: skipped)
    growth_slice: int
    idle_s: float  # how long the idle server's CPU is measured after the growth figure


FULL = Scale("full", 4_000, 2_000, 4_000, 0, 1_000, 10.0)
QUICK = Scale("quick", 400, 200, 400, 1_000, 250, 3.0)
#: What the growth figures should reach (issue 15): the last slice's rate over the first's, and
#: the idle server's CPU share with every created task still live.
GROWTH_TARGET = 0.9
IDLE_CPU_TARGET_PCT = 1.0


# -- servers ------------------------------------------------------------------------------------


def serve_plain(port: int) -> None:
    """The plain ``mcp`` baseline: an ``MCPServer`` with one ``echo`` tool (run in a child process)."""
    import uvicorn
    from mcp.server.mcpserver import MCPServer

    server: Any = MCPServer("plain-echo", log_level="WARNING")

    @server.tool()
    async def echo(text: str) -> str:
        """Echo the text."""
        return text

    uvicorn.run(server.streamable_http_app(json_response=True), host="127.0.0.1", port=port, log_level="warning")


PEER_SERVER = """
import sys
from fastmcp import FastMCP
mcp = FastMCP("fastmcp-peer")

@mcp.tool
async def echo(text: str) -> str:
    return text

mcp.run(transport="http", host="127.0.0.1", port=int(sys.argv[1]), stateless_http=True, json_response=True,
        show_banner=False, log_level="warning")
"""


@dataclass
class Subject:
    """One server under test: its command line and, once started, its process."""

    label: str
    command: Callable[[int], list[str]]
    port: int = field(default_factory=unused_loopback_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cpu_s(self) -> float:
        """User plus system CPU seconds the server has used so far (``/proc/<pid>/stat``)."""
        if self.process is None:
            return 0.0
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        # utime and stime are fields 14 and 15 of the file, 12 and 13 after the command name.
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_kib(self) -> int:
        """The server's resident set size in KiB (0 when unknown)."""
        if self.process is None:
            return 0
        try:
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        except OSError:
            pass
        return 0


def spawn(subject: Subject, log_path: Path) -> subprocess.Popen[bytes]:
    """Start ``subject``'s server process, its output going to ``log_path``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "benchmarks")])}
    with log_path.open("wb") as out:
        return subprocess.Popen(subject.command(subject.port), env=env, stdout=out, stderr=subprocess.STDOUT)


@asynccontextmanager
async def running(subject: Subject, timeout_s: float = 60.0) -> AsyncIterator[httpx.AsyncClient]:
    """Start ``subject``, wait until it listens, and yield a keep-alive client with 8 connections."""
    log_path = Path(tempfile.gettempdir()) / f"mcpa-peers-{subject.port}.log"
    process = subject.process = spawn(subject, log_path)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                output = log_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{subject.label} exited with {process.returncode}: {output}")
            try:
                with socket.create_connection(("127.0.0.1", subject.port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{subject.label} did not listen within {timeout_s} s") from None
                await asyncio.sleep(0.05)
        limits = httpx.Limits(max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS)
        async with httpx.AsyncClient(base_url=subject.base_url, timeout=60, limits=limits) as http:
            yield http
    finally:
        process.kill()
        process.wait()
        log_path.unlink(missing_ok=True)


def mcp_approval_subject(label: str, db_url: str) -> Subject:
    """The tasks demo server on ``db_url``; ``--threshold 0`` makes ``slow_job`` a task at once."""

    def command(port: int) -> list[str]:
        demo = [sys.executable, "-m", "mcp_approval.testing.tasks_demo", "--port", str(port), "--db", db_url]
        return [*demo, "--threshold", "0", "--poll-interval", "1.0"]

    return Subject(label, command)


def plain_subject() -> Subject:
    return Subject("plain mcp", lambda port: [sys.executable, str(Path(__file__)), "--serve-plain", str(port)])


def peer_subject(python: Path) -> Subject:
    return Subject("FastMCP", lambda port: [str(python), "-c", PEER_SERVER, str(port)])


def install_peer(quick: bool) -> tuple[Path | None, str]:
    """FastMCP with its tasks extra in its own venv: (its python, "") or (None, why not)."""
    python = PEER_VENV / "bin" / "python"
    marker = PEER_VENV / ".installed"
    if marker.exists():
        return python, ""
    try:
        subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True, capture_output=True, timeout=120)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", PEER_PACKAGE],
            check=True,
            capture_output=True,
            timeout=120 if quick else 600,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        last = detail.decode(errors="replace").strip().splitlines()[-1:] if isinstance(detail, bytes) else []
        why = f"{type(exc).__name__}: {last[0]}" if last else type(exc).__name__
        return None, f"pip install {PEER_PACKAGE!r} into {PEER_VENV} failed ({why})"
    marker.write_text(PEER_PACKAGE + "\n")
    return python, ""


# -- figures ------------------------------------------------------------------------------------


async def echo_rate(http: httpx.AsyncClient, calls: int, *, fastmcp: bool = False) -> float:
    """Sync ``echo`` calls/s over 8 connections (a warm-up of 50 first)."""
    wire = Wire(http)
    ids = itertools.count(1)

    async def peer_call(_i: int) -> None:
        payload = {"jsonrpc": "2.0", "id": next(ids), "method": "tools/call"}
        payload["params"] = {"name": "echo", "arguments": {"text": "hi"}}
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        response = await http.post("/mcp", content=json.dumps(payload), headers=headers)
        if response.status_code != 200 or "result" not in response.json():
            raise RuntimeError(f"echo failed: {response.status_code} {response.text[:300]}")

    async def call(_i: int) -> None:
        reply = await wire.call_tool("echo", {"text": "hi"})
        if reply.status != 200 or reply.result.get("isError"):
            raise RuntimeError(f"echo failed: {reply.body!r}")

    op = peer_call if fastmcp else call
    await throughput(op, 50, CONNECTIONS)
    return await throughput(op, calls, CONNECTIONS)


async def create_task(wire: Wire) -> str:
    """A ``slow_job`` promoted to a task at once; it stays ``working`` for the run."""
    reply: Reply = await wire.call_tool("slow_job", {"seconds": LIVE_JOB_S, "label": "peer"})
    result = reply.result
    if result.get("resultType") != "task":
        raise RuntimeError(f"slow_job did not answer with a task: {result!r}")
    return str(result["taskId"])


async def task_rates(http: httpx.AsyncClient, scale: Scale) -> tuple[float, float]:
    """(task creations/s, tasks/get/s), 8 connections."""
    wire = Wire(http)
    created: list[str] = []

    async def create(_i: int) -> None:
        created.append(await create_task(wire))

    async def get(i: int) -> None:
        reply = await wire.get(created[i % len(created)])
        if reply.status != 200 or "status" not in reply.result:
            raise RuntimeError(f"tasks/get failed: {reply.body!r}")

    await throughput(create, 50, CONNECTIONS)
    creating = await throughput(create, scale.creations, CONNECTIONS)
    await throughput(get, 50, CONNECTIONS)
    getting = await throughput(get, scale.gets, CONNECTIONS)
    return creating, getting


async def growth(subject: Subject, http: httpx.AsyncClient, n: int, size: int) -> dict[str, Any]:
    """Create ``n`` live tasks; per slice of ``size`` the rate and the server's CPU ms per creation,
    and RSS per 10,000. CPU per creation barely moves with the machine's other load, so its last
    slice over its first shows a cost growing with the live set when the rates are too noisy to."""
    wire = Wire(http)
    rates: list[float] = []
    cpu_ms: list[float] = []
    rss = {0: subject.rss_kib()}
    for done in range(0, n, size):
        cpu_before = subject.cpu_s()
        rates.append(await throughput(lambda _i: create_task(wire), size, CONNECTIONS))
        cpu_ms.append(1000 * (subject.cpu_s() - cpu_before) / size)
        if (done + size) % 10_000 == 0 or done + size >= n:
            rss[done + size] = subject.rss_kib()
    return {
        "rates": rates,
        "last_over_first": rates[-1] / rates[0],
        "cpu_ms": cpu_ms,
        "cpu_last_over_first": cpu_ms[-1] / cpu_ms[0],
        "rss_kib": rss,
    }


async def idle_cpu_pct(subject: Subject, seconds: float) -> float:
    """The server's CPU use, in percent of one core, while no request arrives for ``seconds``.

    Measured after a settling second (the last requests' follow-up work): what remains is the
    background loops (lease renewal, signals, the sweeper) with every task still live.
    """
    await asyncio.sleep(1.0)
    before, start = subject.cpu_s(), time.monotonic()
    await asyncio.sleep(seconds)
    return 100 * (subject.cpu_s() - before) / (time.monotonic() - start)


# -- main ---------------------------------------------------------------------------------------


async def stores(args: argparse.Namespace, workdir: Path) -> tuple[list[tuple[str, str]], Postgres | None]:
    """(label, URL) of each store under test, and the scratch PostgreSQL database to drop after."""
    found = [("SQLite", f"sqlite:///{workdir / 'peers.db'}")]
    postgres = None
    if not args.no_postgres:
        postgres = await Postgres.create_or_explain(args.postgres_url)
        if postgres is not None:
            found.append(("PostgreSQL", postgres.url))
    if not args.no_redis:
        prefix = f"mcpa-peers-{os.getpid()}:"
        found.append(("Redis", f"{REDIS_URL}?prefix={prefix}"))
    return found, postgres


async def run(args: argparse.Namespace) -> int:
    scale = QUICK if args.quick else FULL
    if args.growth is not None:
        scale = replace(scale, growth=args.growth)
    if args.idle_s is not None:
        scale = replace(scale, idle_s=args.idle_s)
    machine = f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {CONNECTIONS} connections"
    log(f"peers benchmark ({scale.name}); {machine}")

    with tempfile.TemporaryDirectory(prefix="mcpa-peers-") as tmp:
        urls, postgres = await stores(args, Path(tmp))
        try:
            await measure_all(args, scale, urls)
        finally:
            if postgres is not None:
                await postgres.drop()
    return 0


async def measure_all(args: argparse.Namespace, scale: Scale, urls: list[tuple[str, str]]) -> None:
    if not args.only_growth:
        await side_by_side(args, scale, urls)
    if scale.growth:
        await growth_figures(scale, urls)


async def side_by_side(args: argparse.Namespace, scale: Scale, urls: list[tuple[str, str]]) -> None:
    """Sync ``echo`` on every subject, task creation and ``tasks/get`` on every store."""
    plain = plain_subject()
    async with running(plain) as http:
        plain_rate = await echo_rate(http, scale.calls)
    log(f"\nsync echo, calls/s:\n  plain mcp            {plain_rate:7.0f}")
    for label, url in urls:
        subject = mcp_approval_subject(f"mcp-approval {label}", url)
        async with running(subject) as http:
            rate = await echo_rate(http, scale.calls)
            creating, getting = await task_rates(http, scale)
        log(
            f"  mcp-approval {label:<10} {rate:7.0f}  (x{rate / plain_rate:.2f} of plain); "
            f"task creations/s {creating:.0f}, tasks/get/s {getting:.0f}"
        )
    if args.no_peer:
        log("  FastMCP: skipped (--no-peer)")
    else:
        python, why = await asyncio.to_thread(install_peer, args.quick)
        if python is None:
            log(f"  FastMCP: skipped: {why}")
        else:
            try:
                async with running(peer_subject(python)) as http:
                    peer_rate = await echo_rate(http, scale.calls, fastmcp=True)
                log(f"  FastMCP ({PEER_PACKAGE})  {peer_rate:7.0f}  (x{peer_rate / plain_rate:.2f} of plain)")
            except Exception as exc:  # a peer that does not answer is reported, not fatal
                log(f"  FastMCP: skipped: its server did not answer ({type(exc).__name__}: {str(exc)[:300]})")


async def growth_figures(scale: Scale, urls: list[tuple[str, str]]) -> None:
    """Per store: creation as live tasks pile up, then the idle server's CPU with all of them live."""
    log(
        f"\ngrowth: {scale.growth:,} live tasks per store, rate per slice of {scale.growth_slice:,} "
        f"(target: last / first >= {GROWTH_TARGET}); then idle CPU over {scale.idle_s:.0f} s "
        f"(target <= {IDLE_CPU_TARGET_PCT:.0f}%)"
    )
    for label, url in urls:
        subject = mcp_approval_subject(f"mcp-approval {label}", url + ("-growth" if label == "SQLite" else ""))
        async with running(subject) as http:
            figures = await growth(subject, http, scale.growth, scale.growth_slice)
            idle = await idle_cpu_pct(subject, scale.idle_s)
        slices = ", ".join(f"{rate:.0f}" for rate in figures["rates"])
        log(
            f"  {label:<10} per slice/s: {slices}; last / first x{figures['last_over_first']:.2f}; "
            f"RSS KiB {figures['rss_kib']}"
        )
        per_creation = ", ".join(f"{ms:.2f}" for ms in figures["cpu_ms"])
        log(
            f"  {label:<10} server CPU ms per creation, per slice: {per_creation}; "
            f"last / first x{figures['cpu_last_over_first']:.2f}"
        )
        log(f"  {label:<10} idle CPU with {scale.growth:,} live tasks: {idle:.2f}% of one core")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Compare plain mcp, mcp-approval and FastMCP side by side.")
    parser.add_argument("--quick", action="store_true", help="a short CI run (under two minutes)")
    parser.add_argument("--growth", type=int, metavar="N", help="live tasks the growth figure creates per store")
    parser.add_argument("--only-growth", action="store_true", help="only the growth and idle CPU figures")
    parser.add_argument("--idle-s", type=float, metavar="S", help="seconds the idle server's CPU is measured")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-redis", action="store_true")
    parser.add_argument("--no-peer", action="store_true", help="skip FastMCP (no install attempt)")
    parser.add_argument("--serve-plain", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_plain:
        serve_plain(args.serve_plain)
        return 0
    return exit_code_of(run(args))


if __name__ == "__main__":
    sys.exit(main())
