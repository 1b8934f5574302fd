"""Benchmark of the PEP over HTTP: ``serve`` with ``HttpPDP`` + the ARAP backend against ``arap-server``.

Run from the repository root::

    .venv/bin/python benchmarks/arap_bench.py [--quick] [--json [PATH]]

Two figures, each with a baseline measured in the same run, interleaved with it:

1. Approval round trip over HTTP on 127.0.0.1: ``tools/call`` (a requestable denial from the
   remote PDP, an Access Request submitted to the ARS) → a reviewer approves on the arap-server
   → the ARS's signed callback wakes ``serve`` → status GET → re-evaluation at the PDP with
   ``context.approval`` → claim → the tool runs → ``tasks/get`` reads ``completed``. p50 and p99
   of the whole client-observed time. Baseline: the same round trip on the local backend (Cedar
   in process, the reviewer on ``serve`` itself). Samples alternate ABBA between the two.
2. PDP evaluations per second over HTTP: ``HttpPDP.evaluate`` against the arap-server's PDP
   (permits, and requestable denials, which sign a ``binding_token``), 16 concurrent callers.
   Baseline: the same requests to the in-process ``CedarPDP`` on the same policy, rounds interleaved.

Both ``serve`` and ``arap-server`` are real subprocesses on SQLite in a temporary directory.
The table ends with each figure, its baseline and the ratio; there are no targets (INFO). Exit
status 0 whatever the figures are, 1 on an error.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # for tests.support

import httpx  # noqa: E402
import httpx2  # noqa: E402
from measure import Report, Row, exit_code_of, log, median, percentile, settle, throughput  # noqa: E402
from tests.support.arap import ArapDeployment, arap_deployment  # noqa: E402
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir  # noqa: E402

from mcp_approval.checks.wire import Wire  # noqa: E402
from mcp_approval.policy import CedarPDP, Decision, EvaluationRequest, PolicyDecisionPoint, ToolCallMapper  # noqa: E402
from mcp_approval.policy.http import HttpPDP  # noqa: E402

EXAMPLE = ROOT / "examples" / "treasury"
GATED_AMOUNT = 50_000
#: Room for every sample: no per-principal limit is what is measured here.
LIMITS = {
    "tasks": {"max_tasks": 100_000, "max_per_principal": 100_000},
    "approval": {"submissions_per_minute": 100_000, "max_pending_per_principal": 100_000},
}
CONCURRENCY = 16


@dataclass(frozen=True)
class Scale:
    name: str
    round_trips: int
    evaluation_rounds: int
    evaluations_per_round: int


FULL = Scale("full", 100, 5, 2000)
QUICK = Scale("quick", 10, 2, 300)


_accounts = 0


def account() -> str:
    """A fresh payee, so no two calls are identical (dedup never short-circuits)."""
    global _accounts
    _accounts += 1
    return f"acct-{os.getpid()}-{_accounts}"


@dataclass
class Side:
    """One deployment under measurement: where MCP clients call and where reviewers decide."""

    label: str
    alice: Wire
    carol: Reviewer


async def round_trip(side: Side) -> float:
    """Milliseconds from ``tools/call`` to ``tasks/get`` reading ``completed`` (approved at once)."""
    start = time.perf_counter()
    to = account()
    created = (await side.alice.call_tool("wire_transfer", {"to": to, "amount": GATED_AMOUNT})).result
    if created.get("status") != "working":
        raise RuntimeError(f"{side.label}: expected a working task, got {created!r}")
    approval_id = await pending_id(side.carol, to)
    decided = await side.carol.decide(approval_id, "approve")
    if decided.status_code != 200:
        raise RuntimeError(f"{side.label}: decide answered {decided.status_code}: {decided.text}")
    deadline = time.perf_counter() + 30
    while time.perf_counter() < deadline:
        task = (await side.alice.get(created["taskId"])).result
        if task["status"] == "completed":
            if task["result"]["_meta"].get("io.modelcontextprotocol/tool-approval-disposition") != "approved-executed":
                raise RuntimeError(f"{side.label}: not executed: {task!r}")
            return (time.perf_counter() - start) * 1000
        if task["status"] != "working":
            raise RuntimeError(f"{side.label}: task ended {task['status']}")
        await asyncio.sleep(0.002)
    raise RuntimeError(f"{side.label}: no completion within 30 s")


async def pending_id(carol: Reviewer, to: str) -> str:
    """The reviewer-facing id of the pending request for a transfer to ``to`` (as soon as it is listed)."""
    for _ in range(5000):
        for item in await carol.pending():
            if item["arguments"].get("to") == to:
                return str(item["id"])
        await asyncio.sleep(0.002)
    raise RuntimeError(f"no pending request for {to}")


async def bench_round_trip(scale: Scale, arap: Side, local: Side, report: Report) -> None:
    log("\n[1] approval round trip over HTTP: denial -> submit -> approve -> re-evaluate -> execute")
    samples: dict[str, list[float]] = {arap.label: [], local.label: []}
    for _warm in range(3):
        await round_trip(arap)
        await round_trip(local)
    for i in range(scale.round_trips):
        order = (arap, local) if i % 2 == 0 else (local, arap)
        for side in order:
            samples[side.label].append(await round_trip(side))
    summary = {
        label: {"p50_ms": median(values), "p99_ms": percentile(values, 0.99), "samples": len(values)}
        for label, values in samples.items()
    }
    report.figures["round_trip"] = summary
    a, b = summary[arap.label], summary[local.label]
    for name in ("p50_ms", "p99_ms"):
        log(f"  {name[:3]}: ARAP {a[name]:.1f} ms, local {b[name]:.1f} ms, ratio {a[name] / b[name]:.2f}x")
    report.rows.append(
        Row(
            "approval round trip, ARAP over HTTP: p50 / p99",
            f"{a['p50_ms']:.0f} / {a['p99_ms']:.0f} ms",
            f"local {b['p50_ms']:.0f} / {b['p99_ms']:.0f} ms; ratio "
            f"{a['p50_ms'] / b['p50_ms']:.2f}x / {a['p99_ms'] / b['p99_ms']:.2f}x",
        )
    )


def evaluation_requests() -> list[EvaluationRequest]:
    mapper = ToolCallMapper()
    permit = mapper.map_call(principal="alice", tool="wire_transfer", arguments={"to": "acct-e", "amount": 100})
    denial = mapper.map_call(principal="alice", tool="wire_transfer", arguments={"to": "acct-e", "amount": 50_000})
    return [permit, denial]


async def evaluations_per_second(pdp: PolicyDecisionPoint, request: EvaluationRequest, n: int) -> float:
    async def one(_i: int) -> None:
        decision: Decision = await pdp.evaluate(request)
        if (decision.context or {}).get("reason", "").startswith("pdp_"):
            raise RuntimeError(f"the PDP failed: {decision!r}")

    return await throughput(one, n, CONCURRENCY)


async def bench_evaluations(scale: Scale, pdp_url: str, report: Report) -> None:
    log(f"\n[2] PDP evaluations per second over HTTP ({CONCURRENCY} concurrent callers)")
    local = CedarPDP.from_files(EXAMPLE / "policy.cedar", EXAMPLE / "entities.json")
    limits = httpx2.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    async with httpx2.AsyncClient(timeout=30, limits=limits) as pooled:
        remote = HttpPDP(pdp_url, client=pooled, timeout_s=30)
        permit, denial = evaluation_requests()
        for label, request in (("permit", permit), ("requestable denial", denial)):
            rates: dict[str, list[float]] = {"http": [], "in-process": []}
            await evaluations_per_second(remote, request, 50)  # warm-up
            for round_index in range(scale.evaluation_rounds):
                order: list[tuple[str, PolicyDecisionPoint]] = [("http", remote), ("in-process", local)]
                for name, pdp in order if round_index % 2 == 0 else reversed(order):
                    settle()
                    rates[name].append(await evaluations_per_second(pdp, request, scale.evaluations_per_round))
            http_rate, base = median(rates["http"]), median(rates["in-process"])
            report.figures[f"evaluations_{label.replace(' ', '_')}"] = {
                "http_per_s": http_rate,
                "in_process_per_s": base,
            }
            log(f"  {label}: {http_rate:,.0f}/s over HTTP, {base:,.0f}/s in process ({http_rate / base:.3f}x)")
            report.rows.append(
                Row(
                    f"PDP evaluations/s over HTTP, {label}",
                    f"{http_rate:,.0f}/s",
                    f"in-process Cedar {base:,.0f}/s; ratio {http_rate / base:.3f}x",
                )
            )


async def run(args: argparse.Namespace) -> int:
    scale = QUICK if args.quick else FULL
    started = time.perf_counter()
    log(f"ARAP benchmark ({scale.name}); python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    report = Report("arap_bench")
    with tempfile.TemporaryDirectory(prefix="mcpa-arap-bench-") as tmp:
        workdir = Path(tmp)
        pair: ArapDeployment = arap_deployment(workdir, LIMITS, name="arap").start()
        local = TreasuryServer(deployment_dir(workdir, LIMITS, name="local")).start(timeout_s=60)
        try:
            async with (
                httpx.AsyncClient(base_url=pair.serve.base_url, timeout=60) as arap_http,
                httpx.AsyncClient(base_url=pair.ars.base_url, timeout=60) as ars_http,
                httpx.AsyncClient(base_url=local.base_url, timeout=60) as local_http,
            ):
                arap_side = Side("arap", Wire(arap_http, token="alice-token"), Reviewer(ars_http, "carol-token"))
                local_side = Side("local", Wire(local_http, token="alice-token"), Reviewer(local_http, "carol-token"))
                await bench_round_trip(scale, arap_side, local_side, report)
            await bench_evaluations(scale, pair.ars_url, report)
        finally:
            pair.kill()
            local.kill()
    seconds = time.perf_counter() - started
    report.publish(scale, seconds, baseline_header="baseline (same run) / ratio", json_target=args.json)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark the ARAP PEP over HTTP against `mcp-approval arap-server`.")
    parser.add_argument("--quick", action="store_true", help="a short run for CI smoke use")
    parser.add_argument(
        "--json", nargs="?", const="-", metavar="PATH", help="also write the results as JSON (to stdout, or PATH)"
    )
    args = parser.parse_args(argv)
    return exit_code_of(run(args))


if __name__ == "__main__":
    sys.exit(main())
