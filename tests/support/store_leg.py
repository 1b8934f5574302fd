"""The PostgreSQL leg of the suite: deployments that would use SQLite use a PostgreSQL database instead.

With ``MCP_APPROVAL_TEST_STORE=postgresql``, every copy of the treasury example that does not name
a store of its own (:func:`tests.support.treasury.deployment_dir`) gets a fresh PostgreSQL
database, made once per deployment folder (a restarted server finds the same one) and dropped
when the test process ends; the controlling process of the run drops any a worker left behind
(every database of a run carries the run's token in its name). ``.ci/run`` runs the
store-touching directories again this way, so a test written against the default store runs on
both. Tests that read the SQLite file itself are marked ``sqlite_store`` and left out of the leg.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import secrets
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from tests.support.timing import scaled

__all__ = ["LEG_VARIABLE", "drop_run_databases", "leg_store_url", "postgres_leg", "start_run", "store_url_for"]

#: ``postgresql`` runs the leg; anything else (or unset) leaves the deployments on SQLite.
LEG_VARIABLE = "MCP_APPROVAL_TEST_STORE"
_ADMIN_URL = os.environ.get("MCP_APPROVAL_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
#: The token that names this run's databases, set by the controlling process for its workers.
RUN_VARIABLE = "MCP_APPROVAL_LEG_RUN"
#: Where a deployment folder remembers its database.
_MARKER = ".postgres-url"
_made: list[str] = []


def postgres_leg() -> bool:
    """Whether this run is the PostgreSQL leg."""
    return os.environ.get(LEG_VARIABLE, "").lower() == "postgresql"


def leg_store_url(directory: Path, filename: str = "store.db") -> str:
    """The store a test opens itself: ``filename`` in ``directory`` on SQLite, the directory's own
    PostgreSQL database on the leg (so a test that builds its store in code runs on both)."""
    return store_url_for(directory) if postgres_leg() else f"sqlite:///{directory / filename}"


def store_url_for(directory: Path) -> str:
    """The PostgreSQL database of the deployment in ``directory``, made on first use."""
    marker = directory / _MARKER
    if marker.exists():
        return marker.read_text(encoding="utf-8").strip()
    name = f"{_run_prefix()}{secrets.token_hex(6)}"
    _admin(f'CREATE DATABASE "{name}"')
    if not _made:
        atexit.register(_drop_all)
    _made.append(name)
    url = f"{_ADMIN_URL.rsplit('/', 1)[0]}/{name}"
    marker.write_text(url, encoding="utf-8")
    return url


def start_run() -> None:
    """In the controlling process, before any worker starts: one token names every database of the run."""
    if postgres_leg():
        os.environ.setdefault(RUN_VARIABLE, secrets.token_hex(4))


def drop_run_databases() -> None:
    """Drop every database of this run still on the server (in the controlling process, at the end).

    Each worker drops its own at exit, but a worker of a long run may be ended before its exit
    handler has dropped them all.
    """
    if postgres_leg() and os.environ.get(RUN_VARIABLE):
        _in_own_loop(_drop_prefixed(_run_prefix()))


def _run_prefix() -> str:
    return f"mcpa_leg_{os.environ.setdefault(RUN_VARIABLE, secrets.token_hex(4))}_"


async def _drop_prefixed(prefix: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(_ADMIN_URL, timeout=scaled(10))
    try:
        rows = await conn.fetch("SELECT datname FROM pg_database WHERE starts_with(datname, $1)", prefix)
        for row in rows:
            try:
                await conn.execute(f'DROP DATABASE IF EXISTS "{row["datname"]}" WITH (FORCE)')
            except asyncpg.PostgresError as exc:  # a worker dropping it right now: theirs to finish
                print(f"store leg: could not drop {row['datname']}: {exc}")
    finally:
        await conn.close()


def _admin(statement: str) -> None:
    _in_own_loop(_admin_statement(statement))


async def _admin_statement(statement: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(_ADMIN_URL, timeout=scaled(10))
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def _in_own_loop(coroutine: Coroutine[Any, Any, None]) -> None:
    # A fixture may be running inside an event loop already: its own thread gets a fresh one.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, coroutine).result(timeout=scaled(60))


def _drop_all() -> None:
    # At exit no loop runs, and no new thread may start: the loop runs here.
    for name in _made:
        try:
            asyncio.run(_admin_statement(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        except Exception as exc:  # a leftover database must not fail the run's exit
            print(f"store leg: could not drop {name}: {exc}")
