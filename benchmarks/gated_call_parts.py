"""Per-request parts of an approval-gated call that need neither the store nor a second pass.

Run from the repository root::

    .venv/bin/python benchmarks/gated_call_parts.py [--calls N] [--postgres-url URL | --no-postgres]

Three figures, each the CPU time of one operation averaged over N repetitions (median of 5
rounds), on the treasury example (``examples/treasury``) built in this process:

- the failed-login throttle's check of a client without failures (what every ``/mcp`` request
  asks first), with the statements it sends, on SQLite and on PostgreSQL (a scratch database);
- ``input_schema`` and ``fingerprint`` of ``wire_transfer`` (the gate's schema check and the
  binding's fingerprint);
- the Cedar decision of a ``wire_transfer`` over 25,000 (a requestable denial).

The exit status is 0 whatever the figures are, 1 when the benchmark itself fails, 2 when
PostgreSQL cannot be reached and ``--no-postgres`` was not given.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from databases import DEFAULT_POSTGRES_URL, Postgres
from measure import median
from sqlalchemy import event

from mcp_approval.approval.tools import ServerTools
from mcp_approval.clock import ManualClock
from mcp_approval.config import load_config
from mcp_approval.server.deployment import build_deployment
from mcp_approval.storage import SHARED_MIGRATIONS, Database, SqlEventWindow, migrate, open_database
from mcp_approval.web.throttle import FailedLoginThrottle

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "treasury"


async def cpu_us(operation: Callable[[], Awaitable[object]], n: int) -> float:
    """Median over 5 rounds of the CPU microseconds one ``operation`` takes."""
    rounds = []
    for _ in range(5):
        start = time.process_time()
        for _ in range(n):
            await operation()
        rounds.append((time.process_time() - start) * 1e6 / n)
    return median(rounds)


def count_statements(database: Database) -> list[str]:
    """Every statement ``database`` sends from now on (PostgreSQL reads use a second engine)."""
    sent: list[str] = []
    engines: list[Any] = [database.engine, *filter(None, [getattr(database, "_reader", None)])]
    for engine in engines:
        event.listen(getattr(engine, "sync_engine", engine), "before_cursor_execute", lambda *_: sent.append(""))
    return sent


async def throttle_check(url: str, n: int) -> tuple[float, float]:
    """CPU microseconds and statements of one check of a client without failures."""
    database = open_database(url)
    try:
        await migrate(database, SHARED_MIGRATIONS)
        throttle = FailedLoginThrottle(ManualClock(), events=SqlEventWindow(database))
        await throttle.record_failure("203.0.113.9")  # another client has failed
        await throttle.retry_after_s("203.0.113.1")
        sent = count_statements(database)
        figure = await cpu_us(lambda: throttle.retry_after_s("203.0.113.1"), n)
        return figure, len(sent) / (5 * n)
    finally:
        await database.close()


async def run(args: argparse.Namespace) -> int:
    n = args.calls
    deployment = build_deployment(load_config(EXAMPLE / "config.toml"), base_url="http://127.0.0.1:8000")
    tools = ServerTools(deployment.server)

    async def listed() -> None:
        await tools.input_schema("wire_transfer")
        await tools.fingerprint("wire_transfer")

    gate = deployment.gate
    request = gate.mapper.map_call(principal="alice", tool="wire_transfer", arguments={"to": "a", "amount": 30_000})
    assert (await gate.pdp.evaluate(request)).requestable_denial is not None
    print(f"input_schema + fingerprint: {await cpu_us(listed, n):.1f} us")
    print(f"requestable Cedar decision: {await cpu_us(lambda: gate.pdp.evaluate(request), n):.1f} us")
    with tempfile.TemporaryDirectory(prefix="mcpa-parts-") as tmp:
        figure, statements = await throttle_check(f"sqlite:///{Path(tmp) / 'store.db'}", n)
        print(f"throttle check, SQLite: {figure:.1f} us, {statements:.2f} statements")
    if args.no_postgres:
        return 0
    postgres = await Postgres.create_or_explain(args.postgres_url)
    if postgres is None:
        return 2
    try:
        figure, statements = await throttle_check(postgres.url, n)
        print(f"throttle check, PostgreSQL: {figure:.1f} us, {statements:.2f} statements")
    finally:
        await postgres.drop()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="repetitions per round")
    parser.add_argument("--postgres-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--no-postgres", action="store_true")
    return asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
