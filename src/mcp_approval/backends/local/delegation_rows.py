"""The rows of delegations: what a delegation is as stored, what of it is sealed, and its checks.

A delegation's row is sealed under the binding key when it is written, over everything that gives
it authority (its delegator, delegate, template and period): a row edited in the database no
longer matches its seal, and a delegation whose row fails delegates nothing. The revocation
changes after the row is written; it is also an audit event, and a delegation whose revocation is
on record delegates nothing even if the column was cleared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, select

from mcp_approval.backends.local.errors import ReviewError
from mcp_approval.backends.local.schema import approval_decisions_table, approval_delegations_table
from mcp_approval.backends.local.seals import RequestSeal
from mcp_approval.clock import iso8601

__all__ = [
    "DELEGATION_CREATED",
    "DELEGATION_REVOKED",
    "Delegation",
    "DelegationError",
    "delegation_failure",
    "delegation_findings",
    "fetch_delegation",
    "seal_delegation",
]

_G = approval_delegations_table
Row = Mapping[str, Any]
#: The audit events of a delegation's life (its decisions are ``approval.decision`` events naming it).
DELEGATION_CREATED = "approval.delegation_created"
DELEGATION_REVOKED = "approval.delegation_revoked"


class DelegationError(ReviewError):
    """A delegation cannot be written or revoked as asked (the message says which rule refused it)."""


def _record(delegation_id: str) -> str:
    # Sealed to its id: a seal copied onto another delegation's row fails.
    return f"delegation|{delegation_id}"


def _document(row: Row) -> dict[str, Any]:
    return {
        "delegation_id": row["delegation_id"],
        "delegator": row["delegator"],
        "delegate": row["delegate"],
        "template": row["template"],
        "starts_at": row["starts_at"],
        "ends_at": row["ends_at"],
        "created_at": row["created_at"],
    }


def seal_delegation(seal: RequestSeal, row: Row) -> str:
    """The seal of a delegation row about to be stored."""
    return seal.seal(_document(row), record=_record(row["delegation_id"]))


def delegation_failure(seal: RequestSeal | None, row: Row) -> str | None:
    """Why a delegation row cannot be trusted as its delegator wrote it, or ``None``.

    Without the binding key nothing can be checked: every delegation fails (it delegates nothing).
    """
    if seal is None:
        return "delegations are checked with the server's binding keys, which were not given here"
    try:
        sealed = seal.open(row["seal"], record=_record(row["delegation_id"]))
    except Exception:  # any failure to authenticate is the same verdict
        return f"the stored delegation {row['delegation_id']}'s seal does not authenticate"
    if sealed != _document(row):
        return f"the stored delegation {row['delegation_id']} does not match what its delegator wrote"
    return None


def fetch_delegation(conn: Connection, delegation_id: str, *, lock: bool = False) -> Row | None:
    """The delegation's row, or ``None``; ``lock`` takes a row lock on PostgreSQL."""
    query = select(_G).where(_G.c.delegation_id == delegation_id)
    row = conn.execute(query.with_for_update() if lock else query).mappings().first()
    return None if row is None else dict(row)


def delegation_findings(conn: Connection, seal: RequestSeal | None) -> list[str]:
    """For ``audit verify``: one line per delegation row that fails its seal (with the binding key),
    and per delegated decision no live delegation from its delegator to its reviewer covered."""
    rows = {row["delegation_id"]: dict(row) for row in conn.execute(select(_G).order_by(_G.c.created_at)).mappings()}
    findings: list[str] = []
    failed: dict[str, str] = {}
    if seal is not None:
        for delegation_id, row in rows.items():
            failure = delegation_failure(seal, row)
            if failure is not None:
                failed[delegation_id] = failure
                findings.append(f"delegation {delegation_id} ({row['delegator']} to {row['delegate']}): {failure}")
    decided = select(approval_decisions_table).where(approval_decisions_table.c.delegation_id.is_not(None))
    for found in conn.execute(decided.order_by(approval_decisions_table.c.decided_at)).mappings():
        decision = dict(found)
        shown = (
            f"the decision of request {decision['request_id']} by {decision['reviewer']} "
            f"for {decision['on_behalf_of']} (delegated)"
        )
        why = _uncovered(rows.get(decision["delegation_id"]), decision, failed)
        if why is not None:
            findings.append(f"{shown}: {why}")
    return findings


def _uncovered(row: Row | None, decision: Row, failed: Mapping[str, str]) -> str | None:
    """Why ``decision`` was not made under a live delegation ``row`` (``failed``: rows failing their seal)."""
    if row is None:
        return f"no delegation {decision['delegation_id']} is stored"
    if row["delegation_id"] in failed:
        return f"its delegation {row['delegation_id']} fails its seal"
    if row["delegate"] != decision["reviewer"] or row["delegator"] != decision["on_behalf_of"]:
        return f"delegation {row['delegation_id']} is from {row['delegator']} to {row['delegate']}"
    at = int(decision["decided_at"])
    if not row["starts_at"] <= at < row["ends_at"]:
        return f"it was made outside delegation {row['delegation_id']}'s period"
    if row["revoked_at"] is not None and at >= row["revoked_at"]:
        return f"it was made after delegation {row['delegation_id']} was revoked"
    return None


@dataclass(frozen=True)
class Delegation:
    """A delegation as reviewers see it.

    Attributes:
        id: the delegation's id (``dlg_…``).
        delegator: the reviewer who handed their role on (and holds it in their own right).
        delegate: the reviewer who may decide for them.
        template: the template whose requests the delegate may decide.
        starts_at, ends_at: epoch ms; the delegate may decide from ``starts_at`` until ``ends_at``.
        created_at: when it was written.
        revoked_at, revoked_by: when and by whom it was revoked, if it was.
        integrity_failure: why its row cannot be trusted (it then delegates nothing), or ``None``.
        read_at: when it was read (epoch ms): what :meth:`state` is as of.
    """

    id: str
    delegator: str
    delegate: str
    template: str
    starts_at: int
    ends_at: int
    created_at: int
    revoked_at: int | None = None
    revoked_by: str | None = None
    integrity_failure: str | None = None
    read_at: int = 0

    @classmethod
    def of(cls, row: Row, failure: str | None, read_at: int) -> Delegation:
        """The delegation a row stores, read at ``read_at`` (``failure``: what :func:`delegation_failure` found)."""
        return cls(
            id=row["delegation_id"],
            delegator=row["delegator"],
            delegate=row["delegate"],
            template=row["template"],
            starts_at=row["starts_at"],
            ends_at=row["ends_at"],
            created_at=row["created_at"],
            revoked_at=row["revoked_at"],
            revoked_by=row["revoked_by"],
            integrity_failure=failure,
            read_at=read_at,
        )

    def state(self, now: int | None = None) -> str:
        """``active``, ``scheduled``, ``revoked``, ``expired`` or ``integrity failure`` at ``now``
        (by default, when it was read)."""
        now = self.read_at if now is None else now
        if self.integrity_failure is not None:
            return "integrity failure"
        if self.revoked_at is not None:
            return "revoked"
        if now >= self.ends_at:
            return "expired"
        if now < self.starts_at:
            return "scheduled"
        return "active"

    def to_json(self) -> dict[str, Any]:
        """The delegation as the reviewer API and ``review delegations --json`` show it (times ISO 8601)."""
        return {
            "id": self.id,
            "state": self.state(),
            "delegator": self.delegator,
            "delegate": self.delegate,
            "template": self.template,
            "starts_at": iso8601(self.starts_at),
            "ends_at": iso8601(self.ends_at),
            "created_at": iso8601(self.created_at),
            "revoked_at": iso8601(self.revoked_at) if self.revoked_at is not None else None,
            "revoked_by": self.revoked_by,
            "integrity_failure": self.integrity_failure,
        }
