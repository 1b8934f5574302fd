"""How a local request ends without a decision (expired, cancelled), and the hook every end runs.

A decision ends a request too (:mod:`~mcp_approval.backends.local.decisions`); every end runs
:data:`TerminalHook` in its own transaction, so what the hook writes commits with the change, or not.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection

from mcp_approval.backends.local.rows import Row, cas, event_data
from mcp_approval.storage.audit import AuditLog

__all__ = ["RequestEndings", "TerminalHook"]

#: Called as ``hook(conn, request_id, status, now_ms)`` inside the transaction that makes a request
#: terminal (decided, cancelled or expired), so what it writes commits, or not, with the change.
TerminalHook = Callable[[Connection, str, str, int], None]


class RequestEndings:
    """Ends pending requests inside the caller's transaction, with their audit events and the hook.

    Args:
        audit: where the events go.
        on_terminal: runs in every transaction that ends a request (``None``: nothing runs).
    """

    def __init__(self, audit: AuditLog, on_terminal: TerminalHook | None) -> None:
        self._audit = audit
        self._on_terminal = on_terminal

    def expire_in(self, conn: Connection, row: Row, now: int) -> None:
        """Expire the pending request ``row`` (its deadline passed)."""
        cas(conn, row, now, status="expired", decided_at=now)
        self._audit.record_in(conn, now, "approval.expired", subject=row["request_id"], data=event_data(row))
        self.ended_in(conn, row["request_id"], "expired", now)

    def cancel_in(self, conn: Connection, row: Row, now: int) -> None:
        """Withdraw the pending request ``row``."""
        handle = row["request_id"]
        cas(conn, row, now, status="cancelled", decided_at=now)
        self._audit.record_in(conn, now, "approval.cancelled", subject=handle, data=event_data(row))
        self.ended_in(conn, handle, "cancelled", now)

    def ended_in(self, conn: Connection, request_id: str, status: str, now: int) -> None:
        """Run the hook: the request ``request_id`` became ``status`` in this transaction."""
        if self._on_terminal is not None:
            self._on_terminal(conn, request_id, status, now)
