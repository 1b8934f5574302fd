"""Running SQLAlchemy Core transactions on SQLite or PostgreSQL with one calling convention.

Store code is written as plain synchronous functions of a :class:`sqlalchemy.Connection`; a
:class:`Database` runs each one as a single transaction:

- SQLite: the stdlib driver. Write transactions run on a dedicated worker thread (a commit
  waits for the disk) and start with ``BEGIN IMMEDIATE``: the write lock is taken up front, so a
  read-modify-write never deadlocks on a lock upgrade. Reads run on the calling thread, statement
  by statement. One hand-off per operation, instead of one per driver call.
- PostgreSQL: asyncpg, the function running inside ``AsyncConnection.run_sync``; reads use a
  second pool of autocommit connections, so a lookup is one round trip.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError, IntegrityError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from mcp_approval.storage.errors import StoreBusyError, StoreUnavailableError, is_busy
from mcp_approval.storage.postgres_url import AsyncpgTarget, asyncpg_target

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = [
    "Database",
    "Operation",
    "PostgresDatabase",
    "SqliteDatabase",
    "StoreBusyError",
    "StoreUnavailableError",
    "normalize_url",
    "open_database",
]

T = TypeVar("T")
Operation = Callable[[Connection], T]


def normalize_url(url: str) -> str:
    """Validate a user-facing database URL: ``sqlite:///PATH``, ``sqlite://`` or ``postgresql://...``.

    A PostgreSQL URL may carry the libpq parameters the driver supports (``sslmode=require``,
    ``sslrootcert=...``, ``connect_timeout=10``, ...; see :mod:`mcp_approval.storage.postgres_url`).

    Raises:
        ValueError: for any other scheme, naming it;
            :class:`~mcp_approval.storage.postgres_url.StoreURLError` (a ``ValueError``) for a
            PostgreSQL URL parameter the driver does not support, naming it.
    """
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return str(parsed.set(drivername="sqlite"))
    if backend in ("postgresql", "postgres"):
        asyncpg_target(parsed)  # refuses what the driver cannot use now, not at the first connection
        return parsed.set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)
    raise ValueError(f"unsupported database URL scheme {parsed.drivername!r}: use sqlite:/// or postgresql://")


class Database:
    """Runs operations as transactions on one database; see the module docstring."""

    dialect: str
    #: How many operations failed with :class:`StoreUnavailableError` (busy included) in this process.
    unavailable_errors: int = 0
    #: When (``time.monotonic()``) the database last answered an operation of this process.
    answered_at: float = 0.0

    async def write(self, operation: Operation[T]) -> T:
        """Run ``operation`` in a write transaction and commit it."""
        raise NotImplementedError

    async def read(self, operation: Operation[T]) -> T:
        """Run a read-only ``operation``."""
        raise NotImplementedError

    async def close(self) -> None:
        """Release connections (and, for ``sqlite://``, the temporary file)."""
        raise NotImplementedError


def open_database(url: str) -> Database:
    """A :class:`Database` for ``url``; ``sqlite://`` is a private temporary file removed on close."""
    normalized = normalize_url(url)
    if make_url(normalized).get_backend_name() == "sqlite":
        return SqliteDatabase(normalized)
    return PostgresDatabase(normalized)


def _unavailable(exc: Exception, *, answered_meanwhile: bool) -> StoreUnavailableError:
    """:class:`StoreBusyError` when ``exc`` says the store is up but busy, or a connection timed out
    while the store went on answering (``answered_meanwhile``); :class:`StoreUnavailableError` else."""
    cause = f"{type(exc).__name__}: {exc}"
    if is_busy(exc) or (isinstance(exc, TimeoutError) and answered_meanwhile):
        return StoreBusyError(f"store busy: {cause}".splitlines()[0])
    return StoreUnavailableError(f"store unavailable: {cause}".splitlines()[0])


@contextmanager
def _translated_errors(database: Database) -> Iterator[None]:
    """Database failures other than constraint violations become :class:`StoreUnavailableError` or
    :class:`StoreBusyError` (counted in ``database.unavailable_errors``); an operation that ends
    otherwise marks the database as having answered (``database.answered_at``)."""
    started = time.monotonic()
    try:
        yield
    except IntegrityError:
        database.answered_at = time.monotonic()
        raise
    except (DBAPIError, OSError, ConnectionError, PoolTimeoutError) as exc:
        database.unavailable_errors += 1
        raise _unavailable(exc, answered_meanwhile=database.answered_at > started) from exc
    database.answered_at = time.monotonic()


class SqliteDatabase(Database):
    """SQLite in WAL mode with ``synchronous=FULL``, driven from one worker thread."""

    dialect = "sqlite"

    def __init__(self, url: str) -> None:
        parsed = make_url(url)
        self._scratch: str | None = None
        if parsed.database in (None, "", ":memory:"):
            self._scratch = tempfile.mkdtemp(prefix="mcp-approval-")
            parsed = parsed.set(database=os.path.join(self._scratch, "store.db"))
        self.engine: Engine = create_engine(parsed, connect_args={"check_same_thread": False})
        event.listen(self.engine, "connect", _sqlite_connect)
        event.listen(self.engine, "begin", _sqlite_begin)
        # One thread: SQLite takes one writer at a time anyway, and a single hand-off per
        # operation is what makes it fast from asyncio.
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-approval-sqlite")
        # Writes waiting for the thread. It commits everything queued in one transaction
        # (group commit): concurrent writers share one fsync instead of queueing for one each.
        self._pending: list[_QueuedWrite] = []
        self._pending_lock = threading.Lock()
        self._draining = False

    async def write(self, operation: Operation[T]) -> T:
        """Run ``operation`` under ``BEGIN IMMEDIATE`` on the worker thread, and commit.

        Operations queued meanwhile share the transaction, each in its own savepoint: one that
        raises is rolled back alone, exactly as if it had run by itself.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._pending_lock:
            self._pending.append(_QueuedWrite(operation, future, loop))
            start, self._draining = not self._draining, True
        if start:
            # Not run_in_executor: its asyncio wrapper costs one more wake-up of the loop per
            # drain, and _drain reports every outcome itself.
            self._thread.submit(self._drain)
        with _translated_errors(self):
            return await future  # type: ignore[no-any-return]

    def _drain(self) -> None:
        """Commit batch after batch until nothing is queued (runs on the writer thread)."""
        batch: list[_QueuedWrite] = []
        try:
            while True:
                with self._pending_lock:
                    batch, self._pending = self._pending[:_GROUP_LIMIT], self._pending[_GROUP_LIMIT:]
                    if not batch:
                        self._draining = False
                        return
                _settle(batch, self._commit_batch(batch))
                batch = []
        except BaseException as exc:
            # Never leave writers waiting on a thread that stopped draining: the next write
            # starts a new drain, and the batch in hand fails with the error.
            with self._pending_lock:
                self._draining = False
            if batch:
                _settle(batch, [(None, exc)] * len(batch))
            raise

    def _commit_batch(self, batch: list[_QueuedWrite]) -> list[tuple[Any, BaseException | None]]:
        outcomes: list[tuple[Any, BaseException | None]] = []
        try:
            with self.engine.connect() as conn:
                conn.info["mode"] = "write"
                with conn.begin():
                    if len(batch) == 1:
                        outcomes.append((batch[0].operation(conn), None))
                    else:
                        savepoint = _Savepoint(conn)
                        outcomes.extend(savepoint.run(item.operation) for item in batch)
        except Exception as exc:  # the transaction or its commit failed: nothing of it holds
            return [(None, exc)] * len(batch)
        return outcomes

    async def read(self, operation: Operation[T]) -> T:
        """Run ``operation`` outside any transaction (each statement sees the latest commit).

        Reads run on the calling thread: in WAL mode a reader never waits for a lock, and the
        work is Python CPU time that holds the GIL wherever it runs, so a thread hand-off would
        only add latency.
        """
        with _translated_errors(self):
            return self._read_sync(operation)

    def _read_sync(self, operation: Operation[T]) -> T:
        with self.engine.connect() as conn:
            conn.info["mode"] = "read"
            return operation(conn)

    async def close(self) -> None:
        """Dispose of the engine, stop the thread, remove a temporary database."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self.engine.dispose)
        self._thread.shutdown(wait=True)
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)


#: At most this many queued writes share one SQLite transaction.
_GROUP_LIMIT = 64


@dataclass(frozen=True)
class _QueuedWrite:
    operation: Operation[Any]
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop


class _Savepoint:
    """Runs each operation of a shared SQLite transaction in a savepoint of its own.

    The savepoint statements go straight to the driver's connection: SQLAlchemy's
    ``begin_nested`` costs a transaction object, events and a compiled statement per
    operation, and nothing here needs them (the outer transaction stays SQLAlchemy's). An
    operation that raises is rolled back to its savepoint, so the others' writes stand.
    """

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._driver: Any = conn.connection.driver_connection

    def run(self, operation: Operation[Any]) -> tuple[Any, BaseException | None]:
        """``(result, None)``, or ``(None, error)`` with the operation's writes undone."""
        driver = self._driver
        driver.execute("SAVEPOINT mcpa_write")
        try:
            value = operation(self._conn)
        except Exception as exc:
            driver.execute("ROLLBACK TO mcpa_write")
            driver.execute("RELEASE mcpa_write")
            return None, exc
        driver.execute("RELEASE mcpa_write")
        return value, None


def _settle(batch: list[_QueuedWrite], outcomes: list[tuple[Any, BaseException | None]]) -> None:
    """Hand each write's result or exception to its waiting coroutine: one wake-up per event loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, BaseException | None]]] = {}
    for item, (value, error) in zip(batch, outcomes, strict=True):
        by_loop.setdefault(item.loop, []).append((item.future, value, error))
    for loop, settled in by_loop.items():
        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits for these writes
            loop.call_soon_threadsafe(_resolve_all, settled)


def _resolve_all(settled: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for future, value, error in settled:
        if future.done():  # the writer gave up waiting (cancelled); the write itself stands
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)


_SQLITE_CACHE_KIB = 32 * 1024


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # The driver's own transaction handling is off; _sqlite_begin issues BEGIN itself.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA foreign_keys=ON")
    # 32 MiB of page cache per connection (SQLite's default is 2 MiB): the indexes on random keys
    # (task ids, idempotency keys, digests) outgrow 2 MiB at a few thousand pending approvals, and
    # every page read past it is a system call, so a creation's CPU rose with the pending set.
    cursor.execute(f"PRAGMA cache_size=-{_SQLITE_CACHE_KIB}")
    cursor.close()


def _sqlite_begin(conn: Connection) -> None:
    mode = conn.info.get("mode")
    if mode == "write":
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    elif mode != "read":  # a read runs statement by statement, in the driver's autocommit
        conn.exec_driver_sql("BEGIN")


#: How long an operation waits for a pooled PostgreSQL connection. A burst of calls (a thousand
#: identical retries, say) queues for the pool; a wait this long means the store is not keeping
#: up at all, and the operation fails as the store being busy.
_POOL_WAIT_S = 120.0


def _replace_closed(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
    """A pooled connection found closed at checkout is replaced by a new one (no round trip).

    The driver notices a connection closed by its peer (a restarted server, a cut network) as
    soon as the event loop reads the end of the stream, long before anyone uses it again.
    """
    if dbapi_connection.driver_connection.is_closed():
        raise DisconnectionError("the pooled connection was closed while idle")


class PostgresDatabase(Database):
    """PostgreSQL through asyncpg; an operation waits up to ``pool_wait_s`` for a pooled connection."""

    dialect = "postgresql"

    def __init__(self, url: str, *, pool_wait_s: float = _POOL_WAIT_S) -> None:
        # Imported here: SQLAlchemy's asyncio extension loads its ORM, which a SQLite store never needs.
        from sqlalchemy.ext.asyncio import create_async_engine

        parsed = make_url(url)
        #: Where asyncpg connects: the libpq parameters of ``url`` stay in this DSN, which asyncpg
        #: reads itself (SQLAlchemy would pass them as keyword arguments it does not accept).
        self.target: AsyncpgTarget = asyncpg_target(parsed)
        # The engines' own URL names the server and database only; connections come from the DSN.
        bare = parsed.set(drivername="postgresql+asyncpg", query={})
        # No pre-ping (it costs a round trip per checkout): a connection the server or the network
        # closed while it sat in the pool is known closed locally, and is replaced at checkout
        # (_replace_closed); one that dies under a statement raises a disconnect error, which
        # invalidates the pool, and the caller's next call reconnects.
        self.engine: AsyncEngine = create_async_engine(
            bare, async_creator=self._connect, pool_size=10, max_overflow=10, pool_timeout=pool_wait_s
        )
        # Reads get their own pool of connections that stay in autocommit: no BEGIN, no
        # ROLLBACK, no isolation-level switch per checkout; a lookup is one round trip.
        self._reader: AsyncEngine = create_async_engine(
            bare,
            async_creator=self._connect,
            pool_size=10,
            max_overflow=10,
            pool_timeout=pool_wait_s,
            isolation_level="AUTOCOMMIT",
            pool_reset_on_return=None,
        )
        for engine in (self.engine, self._reader):
            event.listen(engine.sync_engine, "checkout", _replace_closed)

    async def _connect(self) -> Any:
        import asyncpg  # type: ignore[import-untyped]

        if self.target.timeout_s is None:
            return await asyncpg.connect(self.target.dsn)
        return await asyncpg.connect(self.target.dsn, timeout=self.target.timeout_s)

    async def write(self, operation: Operation[T]) -> T:
        """Run ``operation`` in a transaction and commit."""
        with _translated_errors(self):
            async with self.engine.begin() as conn:
                return await conn.run_sync(operation)

    async def read(self, operation: Operation[T]) -> T:
        """Run ``operation`` on an autocommit connection."""
        with _translated_errors(self):
            async with self._reader.connect() as conn:
                return await conn.run_sync(operation)

    async def close(self) -> None:
        """Dispose of both connection pools."""
        await self.engine.dispose()
        await self._reader.dispose()
