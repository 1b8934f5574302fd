"""The local backend's row access: reading, moving on and deciding ``approval_requests`` rows.

Every status change is a compare-and-set UPDATE on ``status`` and ``version`` (:func:`cas`),
committed in the same transaction as its decision row and audit event.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, func, select, update

from mcp_approval.backends.contract import ApprovalState, ApprovalStatus, ApprovalSubmission, IdempotencyConflictError
from mcp_approval.backends.local.errors import AlreadyDecidedError
from mcp_approval.backends.local.schema import approval_decisions_table, approval_requests_table
from mcp_approval.backends.local.seals import RequestSeal, seal_decision
from mcp_approval.clock import iso8601
from mcp_approval.errors import MCPApprovalError

__all__ = [
    "STATE_COLUMNS",
    "Row",
    "StaleError",
    "cas",
    "decision_rows",
    "due",
    "event_data",
    "existing_request",
    "fetch",
    "insert_decision",
    "resulting_status",
    "state_of",
]

_R = approval_requests_table
_D = approval_decisions_table

Row = Mapping[str, Any]


class StaleError(MCPApprovalError):
    """A compare-and-set lost to a concurrent write; the transaction is rolled back and retried."""


def fetch(conn: Connection, request_id: str, *, lock: bool = False) -> Row | None:
    """The request's row, or ``None``; ``lock`` takes a row lock on PostgreSQL for a decision."""
    query = select(_R).where(_R.c.request_id == request_id)
    # FOR UPDATE serializes decisions on PostgreSQL; SQLite's BEGIN IMMEDIATE already does.
    row = conn.execute(query.with_for_update() if lock else query).mappings().first()
    return None if row is None else dict(row)


def decision_rows(conn: Connection, request_ids: Sequence[str]) -> list[Row]:
    """The decision rows of ``request_ids``, oldest first."""
    query = select(_D).where(_D.c.request_id.in_(request_ids)).order_by(_D.c.decided_at, _D.c.reviewer)
    return [dict(row) for row in conn.execute(query).mappings()]


def cas(conn: Connection, row: Row, now: int, **values: Any) -> None:
    """Move a pending row on, guarded by its status and version; raise :class:`StaleError` if it changed."""
    statement = (
        update(_R)
        .where(_R.c.request_id == row["request_id"], _R.c.status == "pending", _R.c.version == row["version"])
        .values(version=_R.c.version + 1, updated_at=now, **values)
    )
    if conn.execute(statement).rowcount != 1:
        raise StaleError(row["request_id"])


def due(row: Row, now: int) -> bool:
    """Whether a request is pending past its deadline."""
    return row["status"] == "pending" and row["expires_at"] is not None and row["expires_at"] <= now


def existing_request(conn: Connection, key: str, digest: str) -> str | None:
    """The request submitted under ``key``, if any.

    Raises:
        IdempotencyConflictError: it was submitted with a body whose digest is not ``digest``.
    """
    row = conn.execute(select(_R.c.request_id, _R.c.body_digest).where(_R.c.idempotency_key == key)).first()
    if row is None:
        return None
    if row.body_digest != digest:
        raise IdempotencyConflictError(key[:8])
    return str(row.request_id)


def insert_decision(
    conn: Connection,
    request_id: str,
    reviewer: str,
    decision: str,
    comment: str | None,
    now: int,
    *,
    seal: RequestSeal | None = None,
    on_behalf_of: str | None = None,
    delegation_id: str | None = None,
) -> None:
    """Record one reviewer's decision (sealed under ``seal``); a person decides a request at most once.

    A decision made under a delegation (``on_behalf_of``, ``delegation_id``) stands for its
    delegate and its delegator: neither may have decided the request already, in their own right
    or for someone else.

    Raises:
        AlreadyDecidedError: this reviewer, or the delegator, already decided the request.
    """
    humans = {reviewer} if on_behalf_of is None else {reviewer, on_behalf_of}
    earlier = select(_D.c.reviewer, _D.c.on_behalf_of).where(_D.c.request_id == request_id)
    for other, behalf in conn.execute(earlier):
        shared = sorted(humans & {other, behalf} - {None})
        if shared:
            how = f" (as {other} for {behalf})" if behalf is not None else ""
            raise AlreadyDecidedError(f"{shared[0]} already decided request {request_id[:8]}…{how}")
    values: dict[str, Any] = {
        "request_id": request_id,
        "reviewer": reviewer,
        "decision": decision,
        "comment": comment,
        "decided_at": now,
    }
    if on_behalf_of is not None:
        values["on_behalf_of"] = on_behalf_of
        values["delegation_id"] = delegation_id
    if seal is not None:
        values["seal"] = seal_decision(seal, values)
    conn.execute(_D.insert(), values)


def resulting_status(conn: Connection, row: Row, decision: str) -> str | None:
    """The status a just-recorded decision moves the request to, if it ends it (any deny; N approvals)."""
    if decision == "deny":
        return "denied"
    approvals = select(func.count()).where(_D.c.request_id == row["request_id"], _D.c.decision == "approve")
    return "approved" if conn.execute(approvals).scalar_one() >= row["approvals_required"] else None


def event_data(row: Row) -> dict[str, str]:
    """What every audit event about a request carries: the digest of its call (never an argument value).

    Read from the stored body; a body edited since it was submitted yields another digest, which
    then disagrees with the request's ``approval.submitted`` event.
    """
    try:
        body = json.loads(row["body_json"])
        return {"call_digest": ApprovalSubmission.from_json(body).call_digest()}
    except (ValueError, KeyError, TypeError):
        return {"call_digest": "unreadable"}


#: The columns :func:`state_of` and :func:`due` read, and the template the deny note depends on.
STATE_COLUMNS = (
    _R.c.request_id,
    _R.c.status,
    _R.c.template,
    _R.c.expires_at,
    _R.c.approved_until,
    _R.c.decided_at,
)


def state_of(row: Row) -> ApprovalState:
    """The contract's view of an ``approval_requests`` row."""
    status = ApprovalStatus(row["status"])
    if status is ApprovalStatus.APPROVED:
        approval = {
            "id": row["request_id"],
            "approved_at": iso8601(row["decided_at"]),
            "approved_until": iso8601(row["approved_until"]),
        }
        return ApprovalState(status, approval=approval, approved_until_ms=row["approved_until"])
    if status is ApprovalStatus.PENDING:
        return ApprovalState(status, deadline_ms=row["expires_at"])
    return ApprovalState(status)
