"""Calls that never run twice: a journal of the agent's own call keys, their task ids and outcomes.

An agent names each tool call with a ``call_key`` (its run id and call id, or any string). Before a
keyed call returns control, its task id is in the journal; calling again with the same key polls
that task instead of calling the tool again, and a finished call returns its recorded outcome.

A key is bound to the call it named: the server, the tool and a digest of the arguments
(:class:`CallTarget`) are journaled with it, so a key reused for another call is refused instead of
answered with the first call's outcome.

The journal is any :class:`CallJournal`; :class:`SQLiteCallJournal` keeps it in a SQLite file.
Given a key (``SQLiteCallJournal(path, key=...)``), each of its rows is sealed with an HMAC under
that key, so a row edited or planted by anyone without the key (one who can write the file, as
an agent's state directory is written) is refused instead of trusted.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import anyio.to_thread
import rfc8785
from pydantic_core import to_jsonable_python

from mcp_approval.errors import MCPApprovalError

__all__ = [
    "CallJournal",
    "CallJournalIntegrityError",
    "CallOutcome",
    "CallRecord",
    "CallTarget",
    "OutcomeKind",
    "SQLiteCallJournal",
    "keyed_call",
    "note_task_created",
]

OutcomeKind = Literal["result", "task_failed", "task_cancelled"]
"""How a finished call ended: the tool's result, or the remote kind of the task's end."""


@dataclass(frozen=True)
class CallOutcome:
    """What a finished call returned: ``result`` (a ``CallToolResult`` as JSON) or the task's ``error``."""

    kind: OutcomeKind
    task_id: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


@dataclass(frozen=True)
class CallTarget:
    """What a ``call_key`` names: the server, the tool and the SHA-256 of the canonical arguments.

    ``server`` is the server's URL (without user info), ``stdio:<command line>`` or
    ``in-process:<server name>``; ``arguments_digest`` is the hex SHA-256 of the arguments'
    RFC 8785 canonical JSON, so equal arguments in any key order have one digest.
    """

    server: str
    tool_name: str
    arguments_digest: str

    @classmethod
    def of(cls, server: str, tool_name: str, arguments: Mapping[str, Any] | None) -> CallTarget:
        """The target of calling ``tool_name`` with ``arguments`` on ``server``."""
        canonical = rfc8785.dumps(to_jsonable_python(dict(arguments or {})))
        return cls(server, tool_name, hashlib.sha256(canonical).hexdigest())


@dataclass(frozen=True)
class CallRecord:
    """One keyed call: started, then (for a task) its task id, then its outcome.

    ``server`` and ``arguments_digest`` are ``None`` in records written before keys were bound to
    them; such a record is matched on its tool name alone.
    """

    call_key: str
    tool_name: str
    task_id: str | None
    outcome: CallOutcome | None
    started_at: float
    server: str | None = None
    arguments_digest: str | None = None

    def mismatch(self, target: CallTarget) -> str | None:
        """What differs between the recorded call and ``target`` (``None``: the same call)."""
        if self.server is not None and self.server != target.server:
            return f"server {self.server!r}, not {target.server!r}"
        if self.tool_name != target.tool_name:
            return f"tool {self.tool_name!r}, not {target.tool_name!r}"
        if self.arguments_digest is not None and self.arguments_digest != target.arguments_digest:
            return "other arguments"
        return None


class CallJournal(Protocol):
    """Where keyed calls are recorded. Each write is durable before the method returns."""

    async def get(self, call_key: str) -> CallRecord | None:
        """The record of ``call_key``, if the call was ever started."""
        ...

    async def begin(self, call_key: str, target: CallTarget) -> None:
        """Record that the call to ``target`` is about to be sent."""
        ...

    async def task_created(self, call_key: str, task_id: str) -> None:
        """Record the task the server created for the call."""
        ...

    async def finish(self, call_key: str, outcome: CallOutcome) -> None:
        """Record how the call ended."""
        ...

    async def forget(self, call_key: str) -> None:
        """Drop the record (the server refused the call, so nothing ran)."""
        ...

    async def find_task(self, task_id: str) -> CallRecord | None:
        """The record of the call the server made task ``task_id`` for, if one is journaled."""
        ...


class CallJournalIntegrityError(MCPApprovalError, ValueError):
    """A sealed call journal holds a row whose seal does not match it: edited, planted, or sealed under another key."""


#: The shortest key a journal is sealed with (HMAC-SHA256).
MIN_KEY_BYTES = 32


class SQLiteCallJournal:
    """A :class:`CallJournal` in a SQLite file; each write is committed (in a worker thread) before returning.

    Args:
        path: the SQLite file.
        key: seal each row with HMAC-SHA256 under this key (at least 32 bytes). Keep it where the
            file's writers cannot read it (not beside the file): a row whose seal does not match,
            or that has none, raises :class:`CallJournalIntegrityError` when read, so nothing is
            sent or answered from it. ``None``: rows are not sealed (the file is trusted).
    """

    def __init__(self, path: str | Path, *, key: bytes | None = None) -> None:
        if key is not None and len(key) < MIN_KEY_BYTES:
            raise ValueError(f"a call journal's key must be at least {MIN_KEY_BYTES} bytes, not {len(key)}")
        self.path = Path(path)
        self._key = key
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS calls (call_key TEXT PRIMARY KEY, tool_name TEXT NOT NULL,"
            " task_id TEXT, outcome TEXT, started_at REAL NOT NULL, server TEXT, arguments_digest TEXT, seal TEXT)"
        )
        _add_missing_columns(self._db)
        # The status of a pending call is asked by its reference (the task id): find_task looks it up.
        self._db.execute("CREATE INDEX IF NOT EXISTS calls_by_task ON calls (task_id)")

    async def get(self, call_key: str) -> CallRecord | None:
        """The record of ``call_key``, if the call was ever started.

        Raises:
            CallJournalIntegrityError: the journal is sealed and this row's seal does not match it.
        """
        return self._opened(await self._run(f"{_SELECT} WHERE call_key = ?", (call_key,)))

    async def find_task(self, task_id: str) -> CallRecord | None:
        """The record of the call the server made task ``task_id`` for, if one is journaled.

        Raises:
            CallJournalIntegrityError: the journal is sealed and this row's seal does not match it.
        """
        return self._opened(
            await self._run(f"{_SELECT} WHERE task_id = ? ORDER BY started_at DESC LIMIT 1", (task_id,))
        )

    def _opened(self, row: tuple[Any, ...] | None) -> CallRecord | None:
        if row is None:
            return None
        if self._key is not None:
            seal = row[-1]
            if not isinstance(seal, str) or not hmac.compare_digest(seal, _seal(self._key, row[:-1])):
                raise CallJournalIntegrityError(
                    f"the record of call {row[0]!r} in {self.path} does not match its seal (edited, planted, or "
                    "sealed under another key): it is not trusted, and nothing was sent or answered from it"
                )
        return _record(row[:-1])

    async def begin(self, call_key: str, target: CallTarget) -> None:
        """Record that the call to ``target`` is about to be sent.

        Raises:
            ValueError: ``call_key`` is already journaled (the same key in flight twice).
        """
        try:
            await self._run(
                "INSERT INTO calls (call_key, tool_name, started_at, server, arguments_digest) VALUES (?, ?, ?, ?, ?)",
                (call_key, target.tool_name, time.time(), target.server, target.arguments_digest),
            )
        except sqlite3.IntegrityError:
            raise ValueError(f"call {call_key!r} is already journaled in {self.path}") from None
        await self._reseal(call_key)

    async def task_created(self, call_key: str, task_id: str) -> None:
        """Record the task the server created for the call."""
        await self._run("UPDATE calls SET task_id = ? WHERE call_key = ?", (task_id, call_key))
        await self._reseal(call_key)

    async def finish(self, call_key: str, outcome: CallOutcome) -> None:
        """Record how the call ended."""
        await self._run("UPDATE calls SET outcome = ? WHERE call_key = ?", (_outcome_to_json(outcome), call_key))
        await self._reseal(call_key)

    async def forget(self, call_key: str) -> None:
        """Drop the record."""
        await self._run("DELETE FROM calls WHERE call_key = ?", (call_key,))

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._db.close()

    async def _reseal(self, call_key: str) -> None:
        """Seal the row of ``call_key`` as this client just wrote it (a journal without a key seals nothing)."""
        if self._key is not None:
            await anyio.to_thread.run_sync(self._seal_row, self._key, call_key)

    def _seal_row(self, key: bytes, call_key: str) -> None:
        with self._lock:
            row = self._db.execute(f"{_SELECT} WHERE call_key = ?", (call_key,)).fetchone()
            if row is not None:
                self._db.execute("UPDATE calls SET seal = ? WHERE call_key = ?", (_seal(key, row[:-1]), call_key))

    async def _run(self, sql: str, parameters: tuple[Any, ...]) -> Any:
        return await anyio.to_thread.run_sync(self._execute, sql, parameters)

    def _execute(self, sql: str, parameters: tuple[Any, ...]) -> Any:
        with self._lock:
            return self._db.execute(sql, parameters).fetchone()


_SELECT = "SELECT call_key, tool_name, task_id, outcome, started_at, server, arguments_digest, seal FROM calls"


def _seal(key: bytes, row: tuple[Any, ...]) -> str:
    """The HMAC-SHA256 of a row's columns (all but the seal), as canonical JSON."""
    return hmac.new(key, json.dumps(list(row), separators=(",", ":")).encode(), hashlib.sha256).hexdigest()


def _record(row: tuple[Any, ...] | None) -> CallRecord | None:
    if row is None:
        return None
    key, tool_name, task_id, outcome, started_at, server, digest = row
    return CallRecord(key, tool_name, task_id, _outcome_from_json(outcome), started_at, server, digest)


def _add_missing_columns(db: sqlite3.Connection) -> None:
    """Bring a journal written before keys were bound to their call, or sealed, up to date (its rows keep ``NULL``)."""
    present = {row[1] for row in db.execute("PRAGMA table_info(calls)")}
    for column in ("server", "arguments_digest", "seal"):
        if column not in present:
            db.execute(f"ALTER TABLE calls ADD COLUMN {column} TEXT")


def _outcome_to_json(outcome: CallOutcome) -> str:
    return json.dumps(
        {"kind": outcome.kind, "task_id": outcome.task_id, "result": outcome.result, "error": outcome.error}
    )


def _outcome_from_json(text: str | None) -> CallOutcome | None:
    if text is None:
        return None
    data = json.loads(text)
    return CallOutcome(kind=data["kind"], task_id=data["task_id"], result=data["result"], error=data["error"])


@dataclass(frozen=True)
class _KeyedCall:
    call_key: str
    journal: CallJournal


# The keyed call in progress in this task, so the tasks extension can journal the task id it receives.
_KEYED_CALL: ContextVar[_KeyedCall | None] = ContextVar("mcp_approval_keyed_call", default=None)


@contextmanager
def keyed_call(call_key: str, journal: CallJournal) -> Iterator[None]:
    """Marks the calls made inside ``with keyed_call(key, journal):`` as the keyed call ``key``."""
    token = _KEYED_CALL.set(_KeyedCall(call_key, journal))
    try:
        yield
    finally:
        _KEYED_CALL.reset(token)


async def note_task_created(task_id: str) -> None:
    """Journal ``task_id`` for the keyed call in progress, if any (before anything waits on the task)."""
    call = _KEYED_CALL.get()
    if call is not None:
        await call.journal.task_created(call.call_key, task_id)
