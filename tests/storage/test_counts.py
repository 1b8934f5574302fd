"""Counts the database keeps (``storage/counts.py``): reads fold a long scope without changing its
sum, a fold keeps the rows another transaction appends meanwhile, and on PostgreSQL ``reclaim``
vacuums a counts table once folds have left many dead rows."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy import Connection, MetaData, func, select, text

from mcp_approval.storage import Database, open_database
from mcp_approval.storage.counts import FOLD_AT, RECLAIM_AT, ScopedCounts, counts_table
from tests.support.polling import eventually
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio

_METADATA = MetaData()
COUNTS = ScopedCounts(counts_table("probe_counts", _METADATA))


async def _opened(url: str) -> AsyncIterator[Database]:
    database = open_database(url)
    await database.write(lambda conn: _METADATA.create_all(conn))
    try:
        yield database
    finally:
        await database.close()


@pytest.fixture
async def database(db_url: str) -> AsyncIterator[Database]:
    """The counts table in a database of each kind."""
    async for database in _opened(db_url):
        yield database


@pytest.fixture
async def postgres(postgres_url: str) -> AsyncIterator[Database]:
    """The counts table in PostgreSQL: several writers, and dead rows only a vacuum reclaims."""
    async for database in _opened(postgres_url):
        yield database


def _append(conn: Connection, scope: str, deltas: list[int]) -> None:
    conn.execute(COUNTS.table.insert(), [{"scope": scope, "delta": delta} for delta in deltas])


def _rows(conn: Connection, scope: str) -> int:
    return int(conn.execute(select(func.count()).where(COUNTS.table.c.scope == scope)).scalar_one())


async def test_a_read_folds_a_long_scope_and_keeps_every_sum(database: Database) -> None:
    await database.write(lambda conn: _append(conn, "a", [1] * (FOLD_AT + 5) + [-1] * 3))
    await database.write(lambda conn: _append(conn, "b", [1, 1]))
    assert await database.write(lambda conn: COUNTS.read(conn, ["a", "b", "c"])) == {"a": FOLD_AT + 2, "b": 2}
    assert await database.read(lambda conn: _rows(conn, "a")) == 1  # folded: it was over FOLD_AT rows
    assert await database.read(lambda conn: _rows(conn, "b")) == 2  # short: left as it is
    assert await database.write(lambda conn: COUNTS.read(conn, ["a"])) == {"a": FOLD_AT + 2}
    # A scope that sums to 0 folds away; a range read finds the scopes between its ends.
    await database.write(lambda conn: _append(conn, "b", [-1, -1]))
    await database.write(COUNTS.fold_all)
    assert await database.read(lambda conn: _rows(conn, "b")) == 0
    assert await database.write(lambda conn: COUNTS.read_range(conn, "a", "az")) == {"a": FOLD_AT + 2}


async def test_a_fold_keeps_rows_appended_by_another_transaction(postgres: Database) -> None:
    database = postgres  # SQLite has one writer: nothing appends while a fold runs there
    await database.write(lambda conn: _append(conn, "a", [1, 1, 1]))
    engine = database.engine
    async with engine.connect() as appender:
        await appender.begin()
        await appender.run_sync(lambda conn: _append(conn, "a", [1]))  # not committed while the fold runs
        await database.write(lambda conn: COUNTS.fold_scope(conn, "a"))
        await appender.commit()
    assert await database.write(lambda conn: COUNTS.read(conn, ["a"])) == {"a": 4}


async def _fill_with_dead_rows(database: Database) -> None:
    for _ in range(RECLAIM_AT // 500 + 1):
        await database.write(lambda conn: _append(conn, "a", [1] * 500))
        await database.write(lambda conn: COUNTS.fold_scope(conn, "a"))
    await eventually(lambda: _dead_rows(database), lambda dead: dead >= RECLAIM_AT)  # the statistics catch up


async def _dead_rows(database: Database) -> int:
    query = text("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'probe_counts'")
    return int(await database.read(lambda conn: conn.execute(query).scalar() or 0))


async def test_reclaim_vacuums_a_table_full_of_dead_rows(postgres: Database) -> None:
    database = postgres  # SQLite reuses the pages of deleted rows itself: reclaim does nothing there

    async def dead_rows() -> int:
        return await _dead_rows(database)

    await COUNTS.reclaim(database)  # few dead rows: nothing to do
    await _fill_with_dead_rows(database)
    await COUNTS.reclaim(database)
    await eventually(dead_rows, lambda dead: dead < RECLAIM_AT)
    assert await database.write(lambda conn: COUNTS.read(conn, ["a"])) == {"a": 500 * (RECLAIM_AT // 500 + 1)}


async def test_reclaim_skips_a_table_another_worker_is_vacuuming(postgres: Database, postgres_url: str) -> None:
    database = postgres
    await _fill_with_dead_rows(database)
    other = await asyncpg.connect(postgres_url.replace("postgresql://", "postgres://"))
    try:
        async with other.transaction():
            # The lock a VACUUM of the table holds (and waits for): another worker reclaiming it.
            await other.execute("LOCK TABLE probe_counts IN SHARE UPDATE EXCLUSIVE MODE")
            await asyncio.wait_for(COUNTS.reclaim(database), timeout=scaled(30))  # it returns: no wait
            assert await _dead_rows(database) >= RECLAIM_AT
    finally:
        await other.close()
    await COUNTS.reclaim(database)
    await eventually(lambda: _dead_rows(database), lambda dead: dead < RECLAIM_AT)
