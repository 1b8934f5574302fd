"""Approval requests as reviewers see them: records made of a request's rows, redacted, and pages of them."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from mcp_approval.backends.contract import ApprovalStatus, EarlierCall
from mcp_approval.backends.local.rules import ApprovalTemplate, RequestRules, decided_by
from mcp_approval.backends.local.step_up import sealed_digest
from mcp_approval.backends.told import ToldRecord
from mcp_approval.clock import iso8601

if TYPE_CHECKING:
    from mcp_approval.backends.local.sealing import RequestSealing

__all__ = [
    "LISTED_ARGUMENT_CHARS",
    "REDACTED",
    "ApprovalRecord",
    "DecisionRecord",
    "RequestPage",
    "RequestRecords",
    "record_from_rows",
    "redact",
]

REDACTED = "[redacted]"


@dataclass(frozen=True)
class DecisionRecord:
    """One reviewer's decision on a request (``reviewer`` is ``None`` where it is withheld;
    ``on_behalf_of``: the delegator a delegate decided for, ``None`` for a decision in one's own right)."""

    reviewer: str | None
    decision: str
    comment: str | None
    decided_at: int
    on_behalf_of: str | None = None

    @property
    def decided_by(self) -> str:
        """Who decided, as one line: ``dave for carol (delegated)``, or the reviewer."""
        shown = self.reviewer or "a reviewer"
        return shown if self.on_behalf_of is None else f"{shown} for {self.on_behalf_of} (delegated)"

    def to_json(self) -> dict[str, Any]:
        """The decision as JSON (time as ISO 8601)."""
        return {
            "reviewer": self.reviewer,
            "on_behalf_of": self.on_behalf_of,
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
    #: SHA-256 of what the request's seal covers (:func:`~.step_up.sealed_digest`): what a step-up binds.
    sealed_digest: str = ""
    #: Who was reminded of it or told of its escalation, when, on which channel (a single request
    #: read shows them; a listing does not read them).
    told: tuple[ToldRecord, ...] = ()

    def without_reviewers(self) -> ApprovalRecord:
        """The record as its requester sees it: each decision without its reviewer or comment, and
        nothing of who was told about it."""
        hidden = tuple(DecisionRecord(None, d.decision, None, d.decided_at) for d in self.decisions)
        return replace(self, decisions=hidden, told=())

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
            "told": [told.to_json() for told in self.told],
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
    digest: str = "",
) -> ApprovalRecord:
    """The record an ``approval_requests`` row and its ``approval_decisions`` rows describe
    (``digest``: its :func:`~.step_up.sealed_digest`).

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
        decisions=tuple(
            DecisionRecord(d["reviewer"], d["decision"], d["comment"], d["decided_at"], d.get("on_behalf_of"))
            for d in decisions
        ),
        title=body.get("title"),
        description=body.get("description"),
        reason=body.get("reason"),
        inputs=dict(body.get("inputs") or {}),
        integrity_failure=integrity_failure,
        rules=rules,
        possible_duplicate_of=EarlierCall.from_json(body["duplicate_of"]) if body.get("duplicate_of") else None,
        sealed_digest=digest,
    )


class RequestRecords:
    """Makes the record reviewers see of a request's rows: redacted, with the rules it is decided
    by and, when its rows fail their seals, why (its content then withheld).

    Args:
        templates: the configured templates (the rules of rows stored before rules were).
        names: argument names shown as ``"[redacted]"``.
        sealing: checks the rows against their seals.
    """

    def __init__(
        self, templates: Mapping[str, ApprovalTemplate], names: Collection[str], sealing: RequestSealing
    ) -> None:
        self._templates = templates
        self._names = frozenset(names)
        self._sealing = sealing

    def record(self, row: Mapping[str, Any], decisions: Sequence[Mapping[str, Any]]) -> ApprovalRecord:
        """The record of ``row`` with its decisions (``decisions`` may hold other requests' too)."""
        mine = [d for d in decisions if d["request_id"] == row["request_id"]]
        failure = self._sealing.failure(row, mine)
        rules = decided_by(row, self._templates)
        return record_from_rows(
            row, mine, self._names, integrity_failure=failure, rules=rules, digest=sealed_digest(row)
        )
