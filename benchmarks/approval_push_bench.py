"""Benchmark: an approval decision → the client sees ``completed``, pushed vs polled.

Run from the repository root::

    .venv/bin/python benchmarks/approval_push_bench.py [--quick] [--postgres-url URL] [--no-postgres]

Against the treasury example served by ``mcp-approval serve`` (a subprocess over streamable HTTP
on 127.0.0.1, SQLite and PostgreSQL), alice (a client that declared the tasks extension) makes a
transfer over 25,000, which answers with a ``working`` approval task. Then, per round and mode:

- notifications: she opens ``subscriptions/listen`` with the task's id; carol approves over the
  reviewer API; the figure is the approve POST's start → the ``completed`` ``notifications/tasks``
  frame on alice's stream.
- polling (the baseline): she sends ``tasks/get`` every 1 s (the example's ``pollIntervalMs``) from
  the moment the task is created; carol approves at a random phase of that schedule; the figure is
  the approve POST's start → the first ``tasks/get`` that reads ``completed``.

Both figures include the approved tool's own run (the ledger append). Modes alternate per round;
the p50 over rounds (3 with ``--quick``, 10 otherwise) is printed with the ratio polling /
notifications. The exit status is 0 whatever the figures are; 2 when PostgreSQL is not reachable
and ``--no-postgres`` was not given.
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
from dataclasses import dataclass
from pathlib import Path

from approval_bench import Served, gated_call, served
from databases import DatabaseKind, Postgres, add_postgres_arguments, database_kinds
from measure import Report, Row, log
from tests.support.listen import listening

POLL_S = 1.0  # the example's [tasks] poll_interval_s: the pollIntervalMs a polling client honours
NOTIFY_TARGET_MS = 50.0
#: Longest a round may take before it is an error (the approved tool runs in milliseconds).
ROUND_TIMEOUT_S = 30.0


#: The approve POST's own duration (ms) of every counted and uncounted round: context for the figure.
POST_MS: list[float] = []


async def approve(srv: Served, task_id: str) -> float:
    """carol approves the task's approval request; returns the ``perf_counter`` at the POST's start."""
    handle = await srv.handle_of(task_id)
    start = time.perf_counter()
    response = await srv.carol.decide(handle, "approve")
    POST_MS.append((time.perf_counter() - start) * 1000)
    if response.status_code != 200:
        raise RuntimeError(f"approve answered {response.status_code}: {response.text}")
    return start


async def pushed_ms(srv: Served) -> float:
    """Approve while listening for the task: ms from the approve POST to the ``completed`` frame."""
    task_id = await gated_call(srv.alice)
    async with listening(srv.server.base_url, [task_id], token="alice-token") as stream:
        if stream.frames[0]["params"]["notifications"].get("taskIds") != [task_id]:
            raise RuntimeError(f"the listen did not accept the task: {stream.frames[0]!r}")
        await stream.wait_for(lambda _: "working" in stream.statuses(task_id))  # the current state, first
        await asyncio.sleep(random.uniform(0.05, 0.25))  # let the creation's own approval check finish
        start = await approve(srv, task_id)
        await stream.wait_for(lambda _: stream.statuses(task_id)[-1] != "working", timeout_s=ROUND_TIMEOUT_S)
        seen = time.perf_counter()
    final = stream.task_frames(task_id)[-1]
    if final["status"] != "completed" or final["result"].get("isError"):
        raise RuntimeError(f"the approved call did not complete: {final!r}")
    return (seen - start) * 1000


async def polled_ms(srv: Served) -> float:
    """Approve while polling every ``POLL_S``: ms from the approve POST to the ``tasks/get`` reading ``completed``."""
    task_id = await gated_call(srv.alice)

    async def poll() -> float:
        deadline = time.perf_counter() + ROUND_TIMEOUT_S
        while time.perf_counter() < deadline:
            task = (await srv.alice.get(task_id)).result
            if task["status"] == "completed":
                return time.perf_counter()
            if task["status"] != "working":
                raise RuntimeError(f"the approved call ended {task['status']}: {task!r}")
            await asyncio.sleep(POLL_S)
        raise RuntimeError(f"task {task_id} not completed within {ROUND_TIMEOUT_S} s")

    poller = asyncio.create_task(poll())
    await asyncio.sleep(random.uniform(0.05, POLL_S))  # the decision lands at a random phase of the polls
    start = await approve(srv, task_id)
    return (await poller - start) * 1000


async def figure(kind: DatabaseKind, rounds: int) -> Row:
    """Both modes on one database kind, interleaved; the row with the p50s and their ratio."""
    samples: dict[str, list[float]] = {"notifications": [], "polling": []}
    POST_MS.clear()
    async with served(kind, f"push-{kind.label.lower()}") as srv:
        await pushed_ms(srv)  # warm-up of both paths, not counted
        await polled_ms(srv)
        for i in range(rounds):
            for mode in ("notifications", "polling") if i % 2 == 0 else ("polling", "notifications"):
                measure = pushed_ms if mode == "notifications" else polled_ms
                samples[mode].append(await measure(srv))
    p50, base = statistics.median(samples["notifications"]), statistics.median(samples["polling"])
    post = statistics.median(POST_MS)
    log(
        f"{kind.label}: notifications p50 {p50:.1f} ms, polling at {POLL_S:g} s p50 {base:.1f} ms "
        f"({rounds} rounds; the approve POST itself p50 {post:.1f} ms)"
    )
    return Row(
        f"approval decision → client sees completed, {kind.label} (p50)",
        f"{p50:.1f} ms",
        f"{base:.1f} ms polling at {POLL_S:g} s (polling / notifications x{base / max(p50, 0.001):.0f}); "
        f"approve POST alone {post:.1f} ms",
        f"≤ {NOTIFY_TARGET_MS:.0f} ms",
        p50 <= NOTIFY_TARGET_MS,
    )


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds per mode instead of 10 (a smoke run)")
    add_postgres_arguments(parser)
    parser.add_argument(
        "--json", nargs="?", const="-", metavar="PATH", help="also write the results as JSON (to stdout, or PATH)"
    )
    args = parser.parse_args(argv)
    rounds = 3 if args.quick else 10
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    log(f"approval push benchmark, {rounds} rounds; {os.cpu_count()} CPUs, load average {load}")
    postgres = None if args.no_postgres else await Postgres.create_or_explain(args.postgres_url)
    if postgres is None and not args.no_postgres:
        return 2
    report, started = Report("approval_push_bench"), time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="mcpa-approval-push-") as workdir:
            for kind in database_kinds(Path(workdir), postgres, prefix="push"):
                report.add(await figure(kind, rounds))
    finally:
        if postgres is not None:
            await postgres.drop()
    scale = Scale("quick" if args.quick else "full", rounds)
    report.publish(scale, time.perf_counter() - started, baseline_header="baseline", json_target=args.json)
    return 0


@dataclass(frozen=True)
class Scale:
    """How many rounds per mode (for the JSON document)."""

    name: str
    rounds: int


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
