"""A durable record of the tasks an agent is waiting for, in a SQLite file."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["OpenTask", "TaskJournal"]


@dataclass(frozen=True)
class OpenTask:
    """One task the agent has not seen finish."""

    task_id: str
    tool_name: str
    created_at: float


class TaskJournal:
    """Open task ids, kept in a SQLite file so a restarted agent can resume polling them.

    Every write is committed before the method returns.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS open_tasks (task_id TEXT PRIMARY KEY, tool_name TEXT NOT NULL,"
            " created_at REAL NOT NULL)"
        )

    def add(self, task_id: str, tool_name: str) -> None:
        """Record an open task (idempotent)."""
        self._db.execute(
            "INSERT OR IGNORE INTO open_tasks (task_id, tool_name, created_at) VALUES (?, ?, ?)",
            (task_id, tool_name, time.time()),
        )

    def remove(self, task_id: str) -> None:
        """Forget a task that ended or that the server no longer knows."""
        self._db.execute("DELETE FROM open_tasks WHERE task_id = ?", (task_id,))

    def open_tasks(self) -> list[OpenTask]:
        """Every task still open, oldest first."""
        rows = self._db.execute("SELECT task_id, tool_name, created_at FROM open_tasks ORDER BY created_at, task_id")
        return [OpenTask(*row) for row in rows]

    def close(self) -> None:
        """Close the file."""
        self._db.close()
