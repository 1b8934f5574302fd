"""A database counts the operations that failed because it could not be reached."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import Connection, text

from mcp_approval.hosts import unused_loopback_port
from mcp_approval.storage import StoreUnavailableError, open_database
from tests.support.store_proxy import StoreProxy

pytestmark = pytest.mark.anyio


async def test_unreachable_store_operations_are_counted() -> None:
    database = open_database(f"postgresql://nobody@127.0.0.1:{unused_loopback_port()}/none")
    try:
        assert database.unavailable_errors == 0
        for _ in range(2):
            with pytest.raises(StoreUnavailableError):
                await database.read(lambda conn: conn.execute(text("SELECT 1")).scalar_one())
        with pytest.raises(StoreUnavailableError):
            await database.write(lambda conn: conn.execute(text("SELECT 1")).scalar_one())
        assert database.unavailable_errors == 3
    finally:
        await database.close()


async def test_a_constraint_violation_is_not_a_store_error() -> None:
    database = open_database("sqlite://")
    try:
        await database.write(lambda conn: conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY)")))
        await database.write(lambda conn: conn.execute(text("INSERT INTO t VALUES (1)")))
        with pytest.raises(Exception, match="UNIQUE"):
            await database.write(lambda conn: conn.execute(text("INSERT INTO t VALUES (1)")))
        assert database.unavailable_errors == 0
    finally:
        await database.close()


@pytest.mark.postgres
async def test_a_write_on_a_connection_the_server_closed_is_a_store_error(postgres_url: str) -> None:
    """The connection dies under the write (the server terminates it mid-transaction): the caller sees
    StoreUnavailableError, never a SQLAlchemy error about the dead connection's transaction.

    The server ends the write's own backend from inside the write: a connection terminated while it
    sat in the pool may be replaced at checkout instead (see the next test), so it would not be
    "under the write".
    """

    def terminated_midway(conn: Connection) -> int:
        conn.execute(text("SELECT pg_terminate_backend(pg_backend_pid())"))
        return int(conn.execute(text("SELECT 1")).scalar_one())

    database = open_database(postgres_url)
    try:
        await database.write(lambda conn: conn.execute(text("SELECT 1")).scalar_one())  # pooled now
        with pytest.raises(StoreUnavailableError):
            await database.write(terminated_midway)
        assert await database.write(lambda conn: conn.execute(text("SELECT 1")).scalar_one()) == 1  # recovers
    finally:
        await database.close()


@pytest.mark.postgres
async def test_pooled_connections_cut_while_idle_are_replaced_at_checkout(postgres_url: str) -> None:
    """The network cut every pooled connection while they sat idle: the next operations get new
    connections instead of failing on the dead ones (reads and writes have a pool each)."""
    proxy = StoreProxy().start()
    database = open_database(proxy.url(postgres_url))
    try:
        assert await database.write(lambda conn: conn.execute(text("SELECT 1")).scalar_one()) == 1
        assert await database.read(lambda conn: conn.execute(text("SELECT 1")).scalar_one()) == 1  # both pooled now
        proxy.go_down()  # every connection cut (reset) ...
        proxy.come_back()  # ... and the store reachable again at once
        for _ in range(10):  # a few turns of the event loop: the driver reads the closes already delivered
            await asyncio.sleep(0)
        assert await database.read(lambda conn: conn.execute(text("SELECT 2")).scalar_one()) == 2
        assert await database.write(lambda conn: conn.execute(text("SELECT 3")).scalar_one()) == 3
        assert database.unavailable_errors == 0
    finally:
        await database.close()
        proxy.stop()
