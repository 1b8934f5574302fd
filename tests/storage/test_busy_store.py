"""A store that is up but does not serve an operation in time is busy, not unavailable.

Each case makes the store busy on purpose, on a real PostgreSQL server or SQLite file: every pooled
connection held by a statement waiting for a lock, a new connection whose start-up a proxy holds
while the store goes on answering, SQLite's write lock held by another connection.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import Connection, text

from mcp_approval.storage import StoreBusyError, StoreUnavailableError, normalize_url, open_database
from mcp_approval.storage.database import PostgresDatabase
from mcp_approval.storage.errors import is_busy
from tests.support.polling import eventually
from tests.support.store_proxy import StoreProxy
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio

#: Connections a PostgresDatabase's write pool holds at most (pool_size 10 + max_overflow 10).
WRITE_POOL = 20
#: Sessions waiting for the lock on ``gate``.
WAITING_ON_GATE = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%gate%'"


def count_gate(conn: Connection) -> int:
    return int(conn.execute(text("SELECT count(*) FROM gate")).scalar_one())


@asynccontextmanager
async def gate_locked(postgres_url: str) -> AsyncIterator[asyncpg.Connection]:
    """Table ``gate``, locked by another session until the block ends (a statement reading it waits);
    yields a third session to watch the waiting ones from (outside any transaction, so each look is fresh).
    """
    holder = await asyncpg.connect(postgres_url, timeout=scaled(10))
    watcher = await asyncpg.connect(postgres_url, timeout=scaled(10))
    try:
        await holder.execute("CREATE TABLE IF NOT EXISTS gate (id integer)")
        locking = holder.transaction()
        await locking.start()
        await holder.execute("LOCK TABLE gate IN ACCESS EXCLUSIVE MODE")
        try:
            yield watcher
        finally:
            await locking.rollback()
    finally:
        await watcher.close()
        await holder.close()


@pytest.mark.postgres
async def test_an_operation_that_waits_out_the_pool_is_told_the_store_is_busy(postgres_url: str) -> None:
    database = PostgresDatabase(normalize_url(postgres_url), pool_wait_s=scaled(0.5))
    try:
        async with gate_locked(postgres_url) as watcher:
            holding = [asyncio.ensure_future(database.write(count_gate)) for _ in range(WRITE_POOL)]
            await eventually(lambda: watcher.fetchval(WAITING_ON_GATE), lambda count: count == WRITE_POOL)
            with pytest.raises(StoreBusyError, match="store busy: TimeoutError: QueuePool limit"):
                await database.write(count_gate)  # every connection is in use past the pool wait
            assert database.unavailable_errors == 1
        assert await asyncio.gather(*holding) == [0] * WRITE_POOL  # the lock is gone: all of them ran
        assert await database.write(count_gate) == 0
    finally:
        await database.close()


@asynccontextmanager
async def through_slow_proxy(postgres_url: str) -> AsyncIterator[tuple[StoreProxy, PostgresDatabase]]:
    """A database behind a proxy, one pooled connection per pool already made, short connect timeout."""
    proxy = StoreProxy().start()
    connect_timeout = max(2, round(scaled(2)))
    database = open_database(f"{proxy.url(postgres_url)}&connect_timeout={connect_timeout}")
    assert isinstance(database, PostgresDatabase)
    try:
        await database.write(lambda conn: conn.execute(text("CREATE TABLE gate (id integer)")))
        assert await database.read(count_gate) == 0  # the reads' pool has its connection too
        yield proxy, database
    finally:
        proxy.admit_new()
        await database.close()
        proxy.stop()


@pytest.mark.postgres
async def test_a_connection_that_times_out_while_the_store_answers_others_is_busy(postgres_url: str) -> None:
    async with through_slow_proxy(postgres_url) as (proxy, database):
        async with gate_locked(postgres_url) as watcher:
            holding = asyncio.ensure_future(database.write(count_gate))  # the write pool's one connection, waiting
            await eventually(lambda: watcher.fetchval(WAITING_ON_GATE), lambda count: count == 1)
            proxy.hold_new()
            connecting = asyncio.ensure_future(database.write(count_gate))  # needs a new connection: held
            await eventually(lambda: asyncio.sleep(0, proxy.held), lambda held: held == 1)
            assert await database.read(lambda conn: 7) == 7  # the store answers meanwhile (a pooled reader)
            with pytest.raises(StoreBusyError, match="store busy: TimeoutError"):
                await connecting
            proxy.admit_new()
        assert await holding == 0


@pytest.mark.postgres
async def test_a_connection_that_times_out_while_nothing_answers_is_unavailable(postgres_url: str) -> None:
    async with through_slow_proxy(postgres_url) as (proxy, database):
        async with gate_locked(postgres_url) as watcher:
            holding = asyncio.ensure_future(database.write(count_gate))
            await eventually(lambda: watcher.fetchval(WAITING_ON_GATE), lambda count: count == 1)
            proxy.hold_new()
            with pytest.raises(StoreUnavailableError, match="store unavailable: TimeoutError") as raised:
                await database.write(count_gate)  # a new connection, held; the store answers nothing else
            assert not isinstance(raised.value, StoreBusyError)
            proxy.admit_new()
        assert await holding == 0


def test_sqlite_write_lock_held_by_another_connection_is_busy(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    holder = sqlite3.connect(path, isolation_level=None)
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(sqlite3.OperationalError, match="database is locked") as raised:
            other.execute("BEGIN IMMEDIATE")
        assert is_busy(raised.value)
        holder.execute("ROLLBACK")
        assert not is_busy(sqlite3.OperationalError("no such table: gate"))
    finally:
        holder.close()
        other.close()
