"""Change signals between the workers that share a task store.

A signal says "something about task X changed": its status (so ``notifications/tasks`` can be
sent from whichever worker holds the client's listen stream), a cancellation request or answers
to its input requests (so the worker running it acts now, not at its next heartbeat). A signal
is a wake-up, never state: receivers read the store. A status signal may name the status written,
so a stream whose read comes after a later change (pub/sub takes a round trip) still notifies
the passing ``working`` instead of skipping it. A lost signal costs latency only; the
heartbeat and the clients' ``tasks/get`` remain the safety net.

- :class:`LocalTaskSignals`: one process (SQLite).
- :class:`PostgresTaskSignals`: ``LISTEN``/``NOTIFY`` on a dedicated asyncpg connection.
- :class:`RedisTaskSignals`: Redis pub/sub.

:func:`signals_for` picks one for an opened store.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from mcp_approval.storage import PostgresDatabase
from mcp_approval.tasks.sql_store import SqlTaskStore
from mcp_approval.tasks.states import TaskStatus
from mcp_approval.tasks.store import TaskStore

if TYPE_CHECKING:
    import asyncpg  # type: ignore[import-untyped]
    from redis.asyncio import Redis
    from redis.asyncio.client import PubSub

__all__ = [
    "SIGNAL_CHANNEL",
    "LocalTaskSignals",
    "PostgresTaskSignals",
    "RedisTaskSignals",
    "SignalKind",
    "TaskChange",
    "TaskSignals",
    "signals_for",
]

logger = logging.getLogger("mcp_approval.tasks")

#: The PostgreSQL ``NOTIFY`` channel and (after the key prefix) the Redis pub/sub channel.
SIGNAL_CHANNEL: Final = "mcp_approval_tasks"
#: How long a worker waits after a failed connect before the next one (its heartbeat covers meanwhile).
_RECONNECT_PAUSE_S: Final = 2.0


class SignalKind(enum.StrEnum):
    """What changed about a task."""

    STATUS = "status"
    CANCEL = "cancel"
    INPUT = "input"


@dataclass(frozen=True)
class TaskChange:
    """One signal: ``task_id`` had a change of ``kind`` (to ``status``, when the publisher knows it)."""

    task_id: str
    kind: SignalKind
    status: TaskStatus | None = None

    def encode(self) -> str:
        """The wire form (small JSON; far below PostgreSQL's 8000-byte payload limit)."""
        data = {"t": self.task_id, "k": self.kind.value}
        if self.status is not None:
            data["s"] = self.status.value
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def decode(cls, payload: str | bytes) -> TaskChange | None:
        """Parse a payload; ``None`` for anything malformed (a foreign publisher is ignored)."""
        try:
            data = json.loads(payload)
            status = TaskStatus(data["s"]) if "s" in data else None
            return cls(task_id=str(data["t"]), kind=SignalKind(data["k"]), status=status)
        except (ValueError, KeyError, TypeError):
            return None


Listener = Callable[[TaskChange], None]


class TaskSignals(Protocol):
    """Publish and receive task change signals among the workers sharing a store.

    Listeners are synchronous, must not raise, and run on the event loop of the receiving worker.
    ``publish`` never raises for an unreachable backend (the signal is dropped and logged).
    """

    async def open(self) -> None:
        """Connect (a worker that cannot connect still runs: it falls back to heartbeats)."""
        ...

    async def close(self) -> None:
        """Disconnect."""
        ...

    async def publish(self, change: TaskChange) -> None:
        """Deliver ``change`` to every listener of every worker, this one included."""
        ...

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Register ``listener`` in this worker; returns an idempotent unsubscribe."""
        ...


class _Fanout:
    """The local half every implementation shares: listeners of this process."""

    def __init__(self) -> None:
        self._listeners: dict[object, Listener] = {}

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Register ``listener``; returns an idempotent unsubscribe."""
        token = object()
        self._listeners[token] = listener
        return lambda: self._listeners.pop(token, None) and None

    def deliver(self, change: TaskChange) -> None:
        """Hand ``change`` to every local listener, isolating them from each other."""
        for listener in list(self._listeners.values()):
            try:
                listener(change)
            except Exception:  # fan-out boundary
                logger.exception("task signal listener raised; continuing")


class LocalTaskSignals(_Fanout):
    """Signals within one process (a SQLite store has exactly one worker)."""

    async def open(self) -> None:
        """Nothing to connect."""

    async def close(self) -> None:
        """Nothing to disconnect."""

    async def publish(self, change: TaskChange) -> None:
        """Deliver to this process's listeners."""
        self.deliver(change)


class PostgresTaskSignals(_Fanout):
    """``LISTEN``/``NOTIFY`` on one dedicated asyncpg connection per worker.

    ``NOTIFY`` reaches every listening session, this worker's included, so delivery is the same
    path for local and remote changes. A dropped connection is reopened by the next publish or
    by :meth:`reconnect_if_lost` (the runtime's heartbeat calls it).
    """

    def __init__(self, dsn: str) -> None:
        super().__init__()
        self._dsn = dsn
        self._conn: asyncpg.Connection | None = None
        self._lock = asyncio.Lock()
        self._retry_at = 0.0  # after a failed connect, the next attempt waits (no storm while down)

    async def open(self) -> None:
        """Connect and ``LISTEN``; an unreachable server is logged (heartbeats still work)."""
        await self.reconnect_if_lost()

    async def reconnect_if_lost(self) -> None:
        """(Re)open the listening connection if it is missing or closed."""
        import asyncpg

        async with self._lock:
            if self._conn is not None and not self._conn.is_closed():
                return
            loop = asyncio.get_running_loop()
            if loop.time() < self._retry_at:
                return
            try:
                conn = await asyncpg.connect(self._dsn, timeout=2)
                await conn.add_listener(SIGNAL_CHANNEL, self._on_notify)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                logger.warning("task signals: cannot listen on PostgreSQL (%s); heartbeats only", exc)
                self._conn = None
                self._retry_at = loop.time() + _RECONNECT_PAUSE_S
                return
            self._conn = conn

    def _on_notify(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        change = TaskChange.decode(payload)
        if change is not None:
            self.deliver(change)

    async def close(self) -> None:
        """Stop listening and close the connection."""
        async with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close(timeout=2)

    async def publish(self, change: TaskChange) -> None:
        """``pg_notify`` on the listening connection (so this worker hears it too)."""
        import asyncpg

        await self.reconnect_if_lost()
        async with self._lock:
            conn = self._conn
            if conn is None:
                self.deliver(change)  # at least this worker's listeners learn of it
                return
            try:
                await conn.execute("SELECT pg_notify($1, $2)", SIGNAL_CHANNEL, change.encode())
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                logger.warning("task signals: NOTIFY failed (%s)", exc)
                self.deliver(change)


class RedisTaskSignals(_Fanout):
    """Redis pub/sub on the channel ``<prefix>mcp_approval_tasks``."""

    def __init__(self, connect: Callable[[], Redis], *, prefix: str) -> None:
        super().__init__()
        self._connect = connect
        self.channel = f"{prefix}{SIGNAL_CHANNEL}"
        self._client: Redis | None = None
        self._pubsub: PubSub | None = None
        self._reader: asyncio.Task[None] | None = None

    async def open(self) -> None:
        """Subscribe and start reading messages in the background."""
        self._client = self._connect()
        self._reader = asyncio.create_task(self._read_loop(), name="mcp-approval task signals")

    async def _read_loop(self) -> None:
        from redis.exceptions import RedisError

        assert self._client is not None
        while True:
            try:
                self._pubsub = self._client.pubsub(ignore_subscribe_messages=True)
                await self._pubsub.subscribe(self.channel)
                async for message in self._pubsub.listen():
                    change = TaskChange.decode(message.get("data", b""))
                    if change is not None:
                        self.deliver(change)
            except (RedisError, OSError) as exc:
                logger.warning("task signals: Redis subscription lost (%s); retrying", exc)
                await asyncio.sleep(0.5)

    async def close(self) -> None:
        """Stop reading and release the connections."""
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
            self._reader = None
        if self._pubsub is not None:
            with contextlib.suppress(Exception):
                await self._pubsub.aclose()  # type: ignore[no-untyped-call,unused-ignore]
            self._pubsub = None
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()
            self._client = None

    async def publish(self, change: TaskChange) -> None:
        """``PUBLISH`` to every worker's subscription (this worker's included)."""
        from redis.exceptions import RedisError

        if self._client is None:
            self.deliver(change)
            return
        try:
            await self._client.publish(self.channel, change.encode())
        except (RedisError, OSError) as exc:
            logger.warning("task signals: PUBLISH failed (%s)", exc)
            self.deliver(change)


def signals_for(store: TaskStore) -> TaskSignals:
    """The signals matching an opened store: NOTIFY for PostgreSQL, pub/sub for Redis, else local."""
    if isinstance(store, SqlTaskStore) and isinstance(store.database, PostgresDatabase):
        return PostgresTaskSignals(store.database.target.dsn)
    connect = getattr(store, "connector", None)
    if connect is not None:
        return RedisTaskSignals(connect, prefix=getattr(store, "prefix", ""))
    return LocalTaskSignals()
