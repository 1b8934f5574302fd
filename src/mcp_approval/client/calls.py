"""Calls that never run twice: a journal of the agent's own call keys, their task ids and outcomes.

An agent names each tool call with a ``call_key`` (its run id and call id, or any string). Before a
keyed call returns control, its task id is in the journal; calling again with the same key polls
that task instead of calling the tool again, and a finished call returns its recorded outcome.

The journal is any :class:`CallJournal`; :class:`SQLiteCallJournal` keeps it in a SQLite file.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import anyio.to_thread

__all__ = [
    "CallJournal",
    "CallOutcome",
    "CallRecord",
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
class CallRecord:
    """One keyed call: started, then (for a task) its task id, then its outcome."""

    call_key: str
    tool_name: str
    task_id: str | None
    outcome: CallOutcome | None
    started_at: float


class CallJournal(Protocol):
    """Where keyed calls are recorded. Each write is durable before the method returns."""

    async def get(self, call_key: str) -> CallRecord | None:
        """The record of ``call_key``, if the call was ever started."""
        ...

    async def begin(self, call_key: str, tool_name: str) -> None:
        """Record that the call is about to be sent."""
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


class SQLiteCallJournal:
    """A :class:`CallJournal` in a SQLite file; each write is committed (in a worker thread) before returning."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS calls (call_key TEXT PRIMARY KEY, tool_name TEXT NOT NULL,"
            " task_id TEXT, outcome TEXT, started_at REAL NOT NULL)"
        )

    async def get(self, call_key: str) -> CallRecord | None:
        """The record of ``call_key``, if the call was ever started."""
        row = await self._run(
            "SELECT call_key, tool_name, task_id, outcome, started_at FROM calls WHERE call_key = ?", (call_key,)
        )
        if row is None:
            return None
        key, tool_name, task_id, outcome, started_at = row
        return CallRecord(key, tool_name, task_id, _outcome_from_json(outcome), started_at)

    async def begin(self, call_key: str, tool_name: str) -> None:
        """Record that the call is about to be sent.

        Raises:
            ValueError: ``call_key`` is already journaled (the same key in flight twice).
        """
        try:
            await self._run(
                "INSERT INTO calls (call_key, tool_name, started_at) VALUES (?, ?, ?)",
                (call_key, tool_name, time.time()),
            )
        except sqlite3.IntegrityError:
            raise ValueError(f"call {call_key!r} is already journaled in {self.path}") from None

    async def task_created(self, call_key: str, task_id: str) -> None:
        """Record the task the server created for the call."""
        await self._run("UPDATE calls SET task_id = ? WHERE call_key = ?", (task_id, call_key))

    async def finish(self, call_key: str, outcome: CallOutcome) -> None:
        """Record how the call ended."""
        await self._run("UPDATE calls SET outcome = ? WHERE call_key = ?", (_outcome_to_json(outcome), call_key))

    async def forget(self, call_key: str) -> None:
        """Drop the record."""
        await self._run("DELETE FROM calls WHERE call_key = ?", (call_key,))

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._db.close()

    async def _run(self, sql: str, parameters: tuple[Any, ...]) -> Any:
        return await anyio.to_thread.run_sync(self._execute, sql, parameters)

    def _execute(self, sql: str, parameters: tuple[Any, ...]) -> Any:
        with self._lock:
            return self._db.execute(sql, parameters).fetchone()


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
