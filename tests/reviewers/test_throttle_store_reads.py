"""The failed-login throttle reads the shared store only for clients known to have failed.

Statements are counted on the real database (a SQLAlchemy ``before_cursor_execute`` listener), on
SQLite and PostgreSQL: a client without failures costs none, while failures recorded by another
worker on the same store still lock a client out here, at once when this worker sees the client
fail too, else within the refresh interval.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from mcp_approval.clock import ManualClock
from mcp_approval.storage import SHARED_MIGRATIONS, Database, SqlEventWindow, migrate, open_database
from mcp_approval.web.throttle import (
    DEFAULT_MAX_FAILURES,
    DEFAULT_REFRESH_S,
    DEFAULT_WINDOW_S,
    FailedLoginThrottle,
)
from tests.approval.inprocess import inprocess_treasury

pytestmark = pytest.mark.anyio

LIMIT = DEFAULT_MAX_FAILURES
REFRESH_MS = round(DEFAULT_REFRESH_S * 1000)


@contextmanager
def statements(database: Database) -> Iterator[list[str]]:
    """The SQL statements ``database`` sends while the block runs."""
    seen: list[str] = []
    # PostgreSQL reads go through a second (autocommit) engine; an async engine's core is sync_engine.
    engines: list[Any] = [database.engine, *filter(None, [getattr(database, "_reader", None)])]
    cores = [getattr(engine, "sync_engine", engine) for engine in engines]

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    for core in cores:
        event.listen(core, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        for core in cores:
            event.remove(core, "before_cursor_execute", record)


@pytest.fixture
async def databases(db_url: str) -> AsyncIterator[tuple[Database, Database]]:
    """Two connections to one migrated store, as two workers hold them."""
    first, second = open_database(db_url), open_database(db_url)
    await migrate(first, SHARED_MIGRATIONS)
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


async def test_a_client_without_failures_costs_no_statement(databases: tuple[Database, Database]) -> None:
    database, _ = databases
    clock = ManualClock()
    throttle = FailedLoginThrottle(clock, events=SqlEventWindow(database))
    assert await throttle.retry_after_s("10.0.0.9") is None  # the first check learns the failed keys
    with statements(database) as sent:
        for n in range(50):
            assert await throttle.retry_after_s(f"10.0.1.{n}") is None
    assert sent == []
    await throttle.record_failure("10.0.0.1")
    with statements(database) as sent:
        assert await throttle.retry_after_s("10.0.0.1") is None  # one failure: under the limit
    assert any("rate_events" in statement for statement in sent)  # a key that failed is counted in the store
    with statements(database) as sent:
        assert await throttle.retry_after_s("10.0.0.2") is None
    assert sent == []


async def test_failures_seen_here_make_the_store_count_everyones(databases: tuple[Database, Database]) -> None:
    clock = ManualClock()
    here = FailedLoginThrottle(clock, events=SqlEventWindow(databases[0]))
    elsewhere = FailedLoginThrottle(clock, events=SqlEventWindow(databases[1]))
    assert await here.retry_after_s("10.0.0.1") is None
    for _ in range(LIMIT - 1):
        await elsewhere.record_failure("10.0.0.1")
    await here.record_failure("10.0.0.1")  # the limit's last failure, before any refresh
    assert await here.retry_after_s("10.0.0.1") == DEFAULT_WINDOW_S
    assert await elsewhere.retry_after_s("10.0.0.1") == DEFAULT_WINDOW_S


async def test_failures_only_elsewhere_lock_a_client_out_within_the_refresh_interval(
    databases: tuple[Database, Database],
) -> None:
    clock = ManualClock()
    here = FailedLoginThrottle(clock, events=SqlEventWindow(databases[0]))
    elsewhere = FailedLoginThrottle(clock, events=SqlEventWindow(databases[1]))
    assert await here.retry_after_s("10.0.0.1") is None
    for _ in range(LIMIT):
        await elsewhere.record_failure("10.0.0.1")
    assert await elsewhere.retry_after_s("10.0.0.1") is not None
    clock.advance(REFRESH_MS)
    with statements(databases[0]) as sent:
        assert await here.retry_after_s("10.0.0.1") is not None
        assert await here.retry_after_s("10.0.0.2") is None
    assert len(sent) == 2  # the refresh, then the locked-out key's count; the other key costs nothing


async def test_successful_requests_to_a_deployment_leave_the_failure_table_alone(tmp_path: Path) -> None:
    clock = ManualClock()
    async with inprocess_treasury(tmp_path, clock=clock) as harness:
        database = harness.deployment.approvals._database
        reviewer = {"authorization": "Bearer carol-token"}
        assert (await harness.alice.call_tool("ledger")).status == 200  # the first check refreshes
        with statements(database) as sent:
            for _ in range(5):
                reply = await harness.alice.call_tool("ledger")
                assert reply.status == 200
                assert not reply.result.get("isError"), reply.result
                assert (await harness.http.get("/approvals", headers=reviewer)).status_code == 200
        assert [statement for statement in sent if "rate_events" in statement] == []
        with statements(database) as sent:
            assert (await harness.http.get("/approvals", headers={"authorization": "Bearer wrong"})).status_code == 401
            assert (await harness.http.get("/approvals", headers={"authorization": "Bearer wrong"})).status_code == 401
        # The failure is recorded, and the next check of that client counts its failures in the store.
        assert sum("rate_events" in statement for statement in sent) >= 3
