"""What a failed store operation tells its caller: the store is unavailable, or it is busy.

A store is *unavailable* when it cannot be reached or failed in a way the caller cannot correct (a
refused or broken connection, a database that does not accept connections). It is *busy* when it is
up but did not serve this operation in time, and the same operation later would succeed: every
pooled connection stayed in use past the pool wait, the server refused a new connection because it
has as many as it allows, a connection could not be completed in time while the store went on
answering this process's other operations, a transaction lost a deadlock or a serialization
conflict, or SQLite's write lock stayed held past its busy timeout. An overloaded server (a burst of
calls on a busy machine) meets these; telling its callers the store is unavailable would be untrue.

:class:`StoreBusyError` is a :class:`StoreUnavailableError`, so code that gives up on a failed
store operation gives up on both alike; :func:`jsonrpc_error` is the one answer a JSON-RPC request
that met either gives.
"""

from __future__ import annotations

from typing import Any, Final, TypedDict

from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from mcp_approval.errors import MCPApprovalError

__all__ = [
    "BUSY_RETRY_AFTER_S",
    "JsonRpcStoreError",
    "StoreBusyError",
    "StoreUnavailableError",
    "is_busy",
    "jsonrpc_error",
]

#: How long a caller told the store is busy waits before trying again (seconds).
BUSY_RETRY_AFTER_S: Final = 5

#: SQLSTATEs of a PostgreSQL server that is up but could not serve the statement now: too many
#: connections; a deadlock or serialization failure (the transaction was rolled back); a lock it
#: would not wait for; a statement cancelled (by ``statement_timeout``, say).
_BUSY_SQLSTATES: Final = frozenset({"53300", "40P01", "40001", "55P03", "57014"})
#: SQLite's SQLITE_BUSY and SQLITE_LOCKED: another writer held the database past ``busy_timeout``.
_SQLITE_BUSY_CODES: Final = frozenset({5, 6})
#: How far down an error's wrapped errors and causes :func:`is_busy` looks (SQLAlchemy, its adapter, the driver).
_CHAIN_DEPTH: Final = 6


class StoreUnavailableError(MCPApprovalError, RuntimeError):
    """The database could not be reached, or failed in a way the caller cannot correct."""


class StoreBusyError(StoreUnavailableError):
    """The database is up but did not serve the operation in time; trying again later succeeds.

    Attributes:
        retry_after_s: when to try again, in seconds.
    """

    def __init__(self, message: str, *, retry_after_s: int = BUSY_RETRY_AFTER_S) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


def is_busy(exc: BaseException) -> bool:
    """Whether ``exc`` (a driver, pool or SQLAlchemy error, or its cause) says the store is up but busy.

    A pool that timed out waiting for a connection, a PostgreSQL SQLSTATE of :data:`_BUSY_SQLSTATES`
    or SQLite's busy codes. A connection that timed out is not judged here: whether the store
    answered meanwhile is something only the database that waited knows.
    """
    seen: BaseException | None = exc
    for _ in range(_CHAIN_DEPTH):  # the error, the driver's error it wraps, the cause of that...
        if seen is None:
            return False
        if isinstance(seen, PoolTimeoutError):
            return True
        if getattr(seen, "sqlstate", None) in _BUSY_SQLSTATES:
            return True
        if getattr(seen, "sqlite_errorcode", None) in _SQLITE_BUSY_CODES:
            return True
        seen = getattr(seen, "orig", None) or seen.__cause__
    return False


class JsonRpcStoreError(TypedDict):
    """The ``code``, ``message`` and ``data`` of a JSON-RPC error (``MCPError(**answer)``)."""

    code: int
    message: str
    data: dict[str, Any] | None


def jsonrpc_error(exc: StoreUnavailableError, store: str) -> JsonRpcStoreError:
    """The JSON-RPC error a request that met ``exc`` in ``store`` (e.g. ``"Approval store"``) answers.

    ``-32603`` either way. A busy store says so and when to try again, in the message and as
    ``data.retryAfterMs``: ``"Approval store busy; try again in 5 s"``. Otherwise the store is
    unavailable: ``"Approval store unavailable"``.
    """
    # Imported here: every user of the storage layer loads this module, few answer JSON-RPC.
    from mcp_approval.protocol import INTERNAL_ERROR

    if isinstance(exc, StoreBusyError):
        message = f"{store} busy; try again in {exc.retry_after_s} s"
        return {"code": INTERNAL_ERROR, "message": message, "data": {"retryAfterMs": exc.retry_after_s * 1000}}
    return {"code": INTERNAL_ERROR, "message": f"{store} unavailable", "data": None}
