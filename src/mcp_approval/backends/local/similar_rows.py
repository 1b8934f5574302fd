"""The rows of similar-call rules: what a rule is as stored, what of it is sealed, and its checks.

A rule's row is sealed under the binding key when it is written, over everything that gives it
authority (its scope, author, template, tool, expiry and use limit): a row edited in the database
no longer matches its seal, and a rule whose row fails decides nothing. Two members change after
the rule is written and are guarded otherwise: ``uses`` is bumped by a compare-and-set and checked
against the rule's sealed decisions (:func:`decisions_by`); a revocation is also an audit event,
and a rule whose revocation is on record decides nothing even if the column was cleared.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, func, select

from mcp_approval.backends.local.schema import (
    approval_decisions_table,
    approval_requests_table,
    similar_call_rules_table,
)
from mcp_approval.backends.local.seals import RequestSeal
from mcp_approval.backends.local.similar import SimilarCallScope, SimilarRuleError, rule_actor
from mcp_approval.clock import iso8601

__all__ = [
    "RuleDecision",
    "SimilarCallRule",
    "decided_by_rule",
    "decisions_by",
    "fetch_rule",
    "rule_failure",
    "seal_rule",
]

_S = similar_call_rules_table
_D = approval_decisions_table
_R = approval_requests_table
Row = Mapping[str, Any]


def _record(rule_id: str) -> str:
    # Sealed to its id: a seal copied onto another rule's row fails.
    return f"similar-rule|{rule_id}"


def _document(row: Row) -> dict[str, Any]:
    return {
        "rule_id": row["rule_id"],
        "template": row["template"],
        "tool_name": row["tool_name"],
        "author": row["author"],
        "source_request": row["source_request"],
        "scope_json": row["scope_json"],
        "created_at": row["created_at"],
        "expires_at": row["expires_at"],
        "max_uses": row["max_uses"],
    }


def seal_rule(seal: RequestSeal, row: Row) -> str:
    """The seal of a rule row about to be stored."""
    return seal.seal(_document(row), record=_record(row["rule_id"]))


def rule_failure(seal: RequestSeal | None, row: Row) -> str | None:
    """Why a rule row cannot be trusted as its author wrote it, or ``None``.

    Without the binding key nothing can be checked: every rule fails (it decides nothing).
    """
    if seal is None:
        return "similar-call rules are checked with the server's binding keys, which were not given here"
    try:
        sealed = seal.open(row["seal"], record=_record(row["rule_id"]))
    except Exception:  # any failure to authenticate is the same verdict
        return "the stored rule's seal does not authenticate"
    if sealed != _document(row):
        return "the stored rule does not match what its author wrote"
    try:
        scope = SimilarCallScope.from_text(row["scope_json"])
    except SimilarRuleError:
        return "the stored rule's scope is unreadable"
    if scope.tool != row["tool_name"] or scope.template != row["template"]:
        return "the stored rule's scope names another tool or template"
    return None


def fetch_rule(conn: Connection, rule_id: str, *, lock: bool = False) -> Row | None:
    """The rule's row, or ``None``; ``lock`` takes a row lock on PostgreSQL."""
    query = select(_S).where(_S.c.rule_id == rule_id)
    row = conn.execute(query.with_for_update() if lock else query).mappings().first()
    return None if row is None else dict(row)


def decisions_by(conn: Connection, rule_id: str) -> int:
    """How many decisions the rule has recorded (each sealed to its request and the rule)."""
    query = select(func.count()).where(_D.c.reviewer == rule_actor(rule_id))
    return int(conn.execute(query).scalar_one())


@dataclass(frozen=True)
class RuleDecision:
    """One call a similar-call rule decided: the request, its tool, its status now, when it was decided."""

    request_id: str
    tool: str
    status: str
    decided_at: int


def decided_by_rule(conn: Connection, rule_id: str) -> list[RuleDecision]:
    """The requests the rule decided, newest decision first."""
    query = (
        select(_D.c.request_id, _D.c.decided_at, _R.c.tool_name, _R.c.status)
        .join(_R, _R.c.request_id == _D.c.request_id)
        .where(_D.c.reviewer == rule_actor(rule_id))
        .order_by(_D.c.decided_at.desc(), _D.c.request_id)
    )
    return [
        RuleDecision(str(row.request_id), str(row.tool_name), str(row.status), int(row.decided_at))
        for row in conn.execute(query)
    ]


@dataclass(frozen=True)
class SimilarCallRule:
    """A similar-call rule as reviewers see it.

    Attributes:
        id: the rule's id (``sim_…``); its decisions are recorded as ``similar-rule:<id>``.
        author: the reviewer who wrote it, approving ``source_request``.
        scope: which calls it decides.
        created_at, expires_at: epoch ms; it decides nothing from ``expires_at`` on.
        max_uses, uses: how many calls it may decide, and has.
        revoked_at, revoked_by: when and by whom it was revoked, if it was.
        integrity_failure: why its row cannot be trusted (it then decides nothing), or ``None``.
        read_at: when it was read (epoch ms, the backend's clock): what :meth:`state` is as of.
        described: the scope in one line, redacted arguments' values withheld (``None`` with a failure).
    """

    id: str
    author: str
    source_request: str
    scope: SimilarCallScope | None
    tool: str
    template: str | None
    created_at: int
    expires_at: int
    max_uses: int
    uses: int
    revoked_at: int | None = None
    revoked_by: str | None = None
    integrity_failure: str | None = None
    read_at: int = 0
    described: str | None = None

    @classmethod
    def of(cls, row: Row, failure: str | None, read_at: int, redact: Collection[str] = ()) -> SimilarCallRule:
        """The rule a row stores, read at ``read_at`` (``failure``: what :func:`rule_failure` found;
        ``redact``: the arguments whose values reviewers do not see)."""
        scope: SimilarCallScope | None = None
        if failure is None:
            scope = SimilarCallScope.from_text(row["scope_json"])
        return cls(
            id=row["rule_id"],
            author=row["author"],
            source_request=row["source_request"],
            scope=scope,
            tool=row["tool_name"],
            template=row["template"],
            created_at=row["created_at"],
            expires_at=row["expires_at"],
            max_uses=row["max_uses"],
            uses=row["uses"],
            revoked_at=row["revoked_at"],
            revoked_by=row["revoked_by"],
            integrity_failure=failure,
            read_at=read_at,
            described=None if scope is None else scope.describe(redact),
        )

    def state(self, now: int | None = None) -> str:
        """``active``, ``revoked``, ``expired``, ``used up`` or ``integrity failure`` at ``now`` (by
        default, when it was read)."""
        now = self.read_at if now is None else now
        if self.integrity_failure is not None:
            return "integrity failure"
        if self.revoked_at is not None:
            return "revoked"
        if now >= self.expires_at:
            return "expired"
        if self.uses >= self.max_uses:
            return "used up"
        return "active"

    def to_json(self) -> dict[str, Any]:
        """The rule as the reviewer API and ``review rules --json`` show it (times ISO 8601)."""
        return {
            "id": self.id,
            "state": self.state(),
            "author": self.author,
            "source_request": self.source_request,
            "tool": self.tool,
            "template": self.template,
            "scope": self.described,
            "principal": None if self.scope is None else self.scope.principal,
            "created_at": iso8601(self.created_at),
            "expires_at": iso8601(self.expires_at),
            "max_uses": self.max_uses,
            "uses": self.uses,
            "revoked_at": iso8601(self.revoked_at) if self.revoked_at is not None else None,
            "revoked_by": self.revoked_by,
            "integrity_failure": self.integrity_failure,
        }
