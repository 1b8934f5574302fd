"""Checks the server commands run before they announce that they serve."""

from __future__ import annotations

import asyncio

from sqlalchemy import Connection, text

from mcp_approval.storage import StoreUnavailableError, open_database
from mcp_approval.storage.postgres_url import StoreURLError, shown_url

__all__ = ["STORE_TIMEOUT_S", "shown_store_url", "store_problem"]

#: How long the store may take to answer one query at startup.
STORE_TIMEOUT_S = 10.0


def shown_store_url(url: str) -> str:
    """``url`` as it may be printed: the password (and a TLS key's ``sslpassword``) replaced by ``***``."""
    return shown_url(url)


def store_problem(url: str, *, timeout_s: float = STORE_TIMEOUT_S) -> str | None:
    """``None`` when the SQL store at ``url`` answers a query; otherwise one line saying why not.

    The line names the store without its password, so it can go to a log or a terminal.
    """
    try:
        asyncio.run(asyncio.wait_for(_query(url), timeout_s))
    except TimeoutError:
        return f"the store {shown_store_url(url)} did not answer within {timeout_s:g}s"
    except StoreURLError as exc:
        return str(exc)
    except (StoreUnavailableError, OSError) as exc:
        reason = str(exc).removeprefix("store unavailable: ").splitlines()[0]
        return f"cannot open the store {shown_store_url(url)}: {reason}"
    return None


async def _query(url: str) -> None:
    database = open_database(url)
    try:
        await database.read(_select_one)
    finally:
        await database.close()


def _select_one(conn: Connection) -> None:
    conn.execute(text("SELECT 1"))
