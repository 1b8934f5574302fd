"""A database counts the operations that failed because it could not be reached."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from mcp_approval.hosts import unused_loopback_port
from mcp_approval.storage import StoreUnavailableError, open_database

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
