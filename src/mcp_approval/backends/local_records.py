"""Approval requests as reviewers see them, their row access, and the errors reviewer operations raise."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import Connection, func, select, update

from mcp_approval.backends.contract import ApprovalStatus, EarlierCall, IdempotencyConflictError
from mcp_approval.backends.local_rules import RequestRules
from mcp_approval.backends.local_schema import approval_decisions_table, approval_requests_table
from mcp_approval.backends.local_seals import RequestSeal, seal_decision
from mcp_approval.clock import iso8601

__all__ = [
    "LISTED_ARGUMENT_CHARS",
    "REDACTED",
    "AlreadyDecidedError",
    "ApprovalRecord",
    "DecisionRecord",
    "NotEligibleError",
    "RequestExpiredError",
    "RequestPage",
    "ReviewError",
    "Row",
    "StaleError",
    "cas",
    "decision_rows",
    "due",
    "existing_request",
    "fetch",
    "insert_decision",
    "record_from_rows",
    "redact",
    "resulting_status",
]

REDACTED = "[redacted]"
_R = approval_requests_table
_D = approval_decisions_table

Row = Mapping[str, Any]


class ReviewError(Exception):
    """A reviewer operation was refused."""


class NotEligibleError(ReviewError):
    """The reviewer may not decide this request (missing role, or self-approval)."""


class AlreadyDecidedError(ReviewError):
    """The request is terminal, or this reviewer already decided it."""


class RequestExpiredError(AlreadyDecidedError):
    """The request's deadline passed before the decision; it is now expired."""


@dataclass(frozen=True)
class DecisionRecord:
    """One reviewer's decision on a request (``reviewer`` is ``None`` where it is withheld)."""

    reviewer: str | None
    decision: str
    comment: str | None
    decided_at: int

    def to_json(self) -> dict[str, Any]:
        """The decision as JSON (time as ISO 8601)."""
        return {
            "reviewer": self.reviewer,
            "decision": self.decision,
            "comment": self.comment,
            "decided_at": iso8601(self.decided_at),
        }


#: The longest arguments (compact JSON characters) a listing shows in full; longer ones are summarized.
LISTED_ARGUMENT_CHARS = 4096


@dataclass(frozen=True)
class ApprovalRecord:
    """An approval request as reviewers see it (arguments redacted).

    Times are epoch milliseconds; :meth:`to_json` renders them as ISO 8601.
    """

    id: str
    status: ApprovalStatus
    tool: str
    arguments: Mapping[str, Any]
    requester: str
    template: str | None
    created_at: int
    expires_at: int | None
    approved_until: int | None
    approvals_required: int
    decisions: tuple[DecisionRecord, ...] = ()
    title: str | None = None
    description: str | None = None
    reason: str | None = None
    #: What the requester supplied for the template's submission inputs (e.g. a justification).
    inputs: Mapping[str, str] = field(default_factory=dict)
    #: Why the stored request cannot be trusted as what was submitted (its content is then withheld
    #: and nobody may approve it), or ``None``.
    integrity_failure: str | None = None
    #: The rules it is decided by (stored with it), or ``None`` when nobody may decide it.
    rules: RequestRules | None = None
    #: The identical earlier call whose request ended (the request may duplicate it), or ``None``.
    possible_duplicate_of: EarlierCall | None = None

    def without_reviewers(self) -> ApprovalRecord:
        """The record as its requester sees it: each decision without its reviewer or comment."""
        hidden = tuple(DecisionRecord(None, d.decision, None, d.decided_at) for d in self.decisions)
        return replace(self, decisions=hidden)

    def listed_json(self) -> dict[str, Any]:
        """The record as a listing shows it: :meth:`to_json`, except that arguments longer than
        :data:`LISTED_ARGUMENT_CHARS` are ``null``, with ``arguments_truncated`` set and their
        start in ``arguments_summary`` (``GET /approvals/{id}`` shows them whole)."""
        body = self.to_json()
        text = json.dumps(body["arguments"], ensure_ascii=False, separators=(",", ":"))
        truncated = len(text) > LISTED_ARGUMENT_CHARS
        body["arguments_truncated"] = truncated
        if truncated:
            body["arguments"] = None
            body["arguments_summary"] = text[: LISTED_ARGUMENT_CHARS - 1] + "…"
        return body

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object."""
        return {
            "id": self.id,
            "status": self.status.value,
            "tool": self.tool,
            "arguments": dict(self.arguments),
            "requester": self.requester,
            "template": self.template,
            "title": self.title,
            "description": self.description,
            "reason": self.reason,
            "inputs": dict(self.inputs),
            "created_at": iso8601(self.created_at),
            "expires_at": None if self.expires_at is None else iso8601(self.expires_at),
            "approved_until": None if self.approved_until is None else iso8601(self.approved_until),
            "approvals_required": self.approvals_required,
            "decisions": [decision.to_json() for decision in self.decisions],
            "integrity_failure": self.integrity_failure,
            "possible_duplicate_of": None
            if self.possible_duplicate_of is None
            else self.possible_duplicate_of.for_reviewers(),
        }


@dataclass(frozen=True)
class RequestPage:
    """One page of a request listing: the records, where the page starts, and how many there are in all."""

    records: list[ApprovalRecord]
    offset: int
    limit: int
    total: int

    @property
    def next_offset(self) -> int | None:
        """Where the next page starts, or ``None`` when this page is the last."""
        following = self.offset + len(self.records)
        return following if following < self.total else None

    def to_json(self) -> dict[str, Any]:
        """The page as a JSON object: ``approvals`` (:meth:`ApprovalRecord.listed_json`), ``total``,
        ``offset``, ``limit``, ``next_offset``."""
        return {
            "approvals": [record.listed_json() for record in self.records],
            "total": self.total,
            "offset": self.offset,
            "limit": self.limit,
            "next_offset": self.next_offset,
        }


def redact(value: Any, names: Collection[str]) -> Any:
    """``value`` with every member named in ``names`` (at any depth) replaced by ``"[redacted]"``."""
    if isinstance(value, Mapping):
        return {key: REDACTED if key in names else redact(item, names) for key, item in value.items()}
    if isinstance(value, list):
        return [redact(item, names) for item in value]
    return value


def record_from_rows(
    row: Mapping[str, Any],
    decisions: Sequence[Mapping[str, Any]],
    names: Collection[str],
    *,
    integrity_failure: str | None = None,
    rules: RequestRules | None = None,
) -> ApprovalRecord:
    """The record an ``approval_requests`` row and its ``approval_decisions`` rows describe.

    With an ``integrity_failure`` the body's content (arguments, texts, inputs) is withheld:
    an edited row must not be read as what will run.
    """
    body = {} if integrity_failure is not None else json.loads(row["body_json"])
    return ApprovalRecord(
        id=row["request_id"],
        status=ApprovalStatus(row["status"]),
        tool=row["tool_name"],
        arguments=redact(body.get("arguments") or {}, names),
        requester=row["requester"],
        template=row["template"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        approved_until=row["approved_until"],
        approvals_required=row["approvals_required"],
        decisions=tuple(DecisionRecord(d["reviewer"], d["decision"], d["comment"], d["decided_at"]) for d in decisions),
        title=body.get("title"),
        description=body.get("description"),
        reason=body.get("reason"),
        inputs=dict(body.get("inputs") or {}),
        integrity_failure=integrity_failure,
        rules=rules,
        possible_duplicate_of=EarlierCall.from_json(body["duplicate_of"]) if body.get("duplicate_of") else None,
    )


class StaleError(Exception):
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
) -> None:
    """Record one reviewer's decision (sealed under ``seal``); a reviewer decides a request at most once.

    Raises:
        AlreadyDecidedError: this reviewer already decided the request.
    """
    mine = select(_D.c.reviewer).where(_D.c.request_id == request_id, _D.c.reviewer == reviewer)
    if conn.execute(mine).first() is not None:
        raise AlreadyDecidedError(f"{reviewer} already decided request {request_id[:8]}…")
    values: dict[str, Any] = {
        "request_id": request_id,
        "reviewer": reviewer,
        "decision": decision,
        "comment": comment,
        "decided_at": now,
    }
    if seal is not None:
        values["seal"] = seal_decision(seal, values)
    conn.execute(_D.insert(), values)


def resulting_status(conn: Connection, row: Row, decision: str) -> str | None:
    """The status a just-recorded decision moves the request to, if it ends it (any deny; N approvals)."""
    if decision == "deny":
        return "denied"
    approvals = select(func.count()).where(_D.c.request_id == row["request_id"], _D.c.decision == "approve")
    return "approved" if conn.execute(approvals).scalar_one() >= row["approvals_required"] else None
