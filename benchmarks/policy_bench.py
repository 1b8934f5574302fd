"""Benchmark of the policy gate (``mcp_approval.approval.PolicyGate``) on an embedded Cedar PDP.

Run from the repository root::

    .venv/bin/python benchmarks/policy_bench.py [--quick]

Figures, each measured in the same run as its baseline, after a warm-up, over several rounds
(median of the rounds reported):

1. ``tools/call`` latency of an *allowed* call through the gate (CedarPDP) vs. the same server
   without the gate, samples interleaved call by call (ABBA), ratio per round; over the
   in-process ``mcp.Client(server)`` (no HTTP: the gate's cost is the largest share here) and
   over streamable HTTP on an in-process ASGI transport (no socket), and over streamable HTTP to
   uvicorn on 127.0.0.1 (how a deployment serves it). Target: ratio <= 1.15.
2. ``CedarPDP.evaluate`` calls per second, called directly on a mapped request (informative).

The exit status is 0 whatever the figures are; 1 only when the benchmark itself fails.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import sys
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from measure import Row, log, paired_calls, print_table, settle

from mcp_approval.approval import PolicyGate
from mcp_approval.policy import CedarPDP, ToolCallMapper

RATIO_TARGET = 1.15
BASE_URL = "http://127.0.0.1:8000"
POLICY = """
permit (principal, action == Action::"tools/call", resource);
forbid (principal, action == Action::"tools/call", resource == tool::"drop_table");
@requestable("deploy_approval")
forbid (principal, action == Action::"tools/call", resource == tool::"deploy")
when { context has arguments && context.arguments has env && context.arguments.env == "prod" }
unless { context has approval };
"""


@dataclass(frozen=True)
class Scale:
    """How much work each figure does."""

    rounds: int
    warmup: int
    calls: int  # per side per round
    evaluations: int  # per round


FULL = Scale(rounds=7, warmup=300, calls=600, evaluations=5_000)
QUICK = Scale(rounds=3, warmup=50, calls=150, evaluations=1_000)


def build_server(gated: bool) -> MCPServer[Any]:
    """The benchmark server: one ``echo`` tool, behind the gate or not (anonymous HTTP caller: ``bench``)."""
    extensions = [PolicyGate(CedarPDP(POLICY), anonymous_principal="bench")] if gated else []
    server: MCPServer[Any] = MCPServer("bench", extensions=extensions, log_level="WARNING")

    @server.tool()
    async def echo(text: str) -> str:
        return text

    return server


@asynccontextmanager
async def connected(server: MCPServer[Any], transport: str) -> AsyncIterator[Client]:
    """A client of ``server`` over ``transport``: "in-process", "http" (ASGI, no socket) or
    "http-loopback" (uvicorn on 127.0.0.1, the way a deployment serves it)."""
    if transport == "in-process":
        async with Client(server) as client:
            yield client
        return
    app = server.streamable_http_app(json_response=True)
    if transport == "http-loopback":
        async with (
            _uvicorn(app) as url,
            httpx2.AsyncClient(timeout=30) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
        ):
            yield client
        return
    async with server.session_manager.run():
        http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=BASE_URL)
        async with Client(streamable_http_client(f"{BASE_URL}/mcp", http_client=http)) as client:
            yield client


@asynccontextmanager
async def _uvicorn(app: Any) -> AsyncIterator[str]:
    """Serve ``app`` with uvicorn on a free loopback port in this event loop; yields its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()  # raises why it stopped
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await serving


def echo_call(client: Client) -> Callable[[], Awaitable[object]]:
    async def call() -> None:
        result = await client.call_tool("echo", {"text": "hello"})
        if result.is_error:
            raise RuntimeError(f"unexpected error result: {result!r}")

    return call


async def bench_latency(scale: Scale, transport: str) -> list[Row]:
    """Figure 1 over ``transport``: gated / plain, mean and p50."""
    log(f"[1] tools/call echo (allowed), gate vs. plain, {transport}")
    async with connected(build_server(True), transport) as gated, connected(build_server(False), transport) as plain:
        gate_call, plain_call = echo_call(gated), echo_call(plain)
        await paired_calls(gate_call, plain_call, scale.warmup)
        means: list[tuple[float, float]] = []
        p50s: list[tuple[float, float]] = []
        for _ in range(scale.rounds):
            settle()
            a, b = await paired_calls(gate_call, plain_call, scale.calls)
            means.append((statistics.fmean(a) / 1000, statistics.fmean(b) / 1000))
            p50s.append((statistics.median(a) / 1000, statistics.median(b) / 1000))
    rows = []
    for label, pairs in (("mean", means), ("p50", p50s)):
        ratio = statistics.median(g / p for g, p in pairs)
        gate_us = statistics.median(g for g, _ in pairs)
        plain_us = statistics.median(p for _, p in pairs)
        log(f"  {label}: gate {gate_us:.0f} us, plain {plain_us:.0f} us, ratio {ratio:.3f}")
        rows.append(
            Row(
                f"tools/call allow [{transport}] gate/plain {label}",
                f"{ratio:.3f}x ({gate_us:.0f} us)",
                f"plain {plain_us:.0f} us",
                f"<= {RATIO_TARGET:.2f}",
                ratio <= RATIO_TARGET,
            )
        )
    return rows


async def bench_cedar(scale: Scale) -> list[Row]:
    """Figure 2: direct ``CedarPDP.evaluate`` throughput, allow and requestable deny."""
    log("[2] CedarPDP.evaluate, direct")
    pdp = CedarPDP(POLICY)
    mapper = ToolCallMapper()
    cases = {
        "allow": mapper.map_call(principal="alice", tool="echo", arguments={"text": "hello"}),
        "requestable deny": mapper.map_call(principal="alice", tool="deploy", arguments={"env": "prod"}),
    }
    rows = []
    for name, request in cases.items():
        for _ in range(scale.evaluations // 10):
            await pdp.evaluate(request)
        rates = []
        for _ in range(scale.rounds):
            settle()
            start = time.perf_counter()
            for _ in range(scale.evaluations):
                await pdp.evaluate(request)
            rates.append(scale.evaluations / (time.perf_counter() - start))
        rate = statistics.median(rates)
        log(f"  {name}: {rate:,.0f} evaluations/s")
        rows.append(Row(f"CedarPDP.evaluate {name}", f"{rate:,.0f} /s", "-"))
    return rows


async def run(scale: Scale) -> None:
    rows = [
        *await bench_latency(scale, "in-process"),
        *await bench_latency(scale, "http"),
        *await bench_latency(scale, "http-loopback"),
    ]
    rows.extend(await bench_cedar(scale))
    print()
    print_table(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a scaled-down smoke run")
    args = parser.parse_args(argv)
    try:
        asyncio.run(run(QUICK if args.quick else FULL))
    except Exception:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
