"""What the local backend seals, and how a request's rows are checked against their seals.

Threat model: someone who can write the server's database, but does not hold its binding key,
wants a call to run that no reviewer approved. They may edit a request's content or rules, flip
its status, forge or edit a decision row, or move a decision to another request. (Pointing a
task at another request is caught by the workflow driver, which compares the request's sealed
content with the task's own sealed call binding before it claims.)

So every row that carries authority is sealed under the binding key when the backend writes it:

- a request's content and the decision rules it was submitted under, sealed to its id;
- each decision (reviewer, verdict, comment, time), sealed to its request and its reviewer.

The status is never trusted as stored: a request counts as approved only when its sealed
decisions satisfy its sealed rules (:func:`approval_granted`), and the approval runs out when
those rules say, counted from the decision that completed it, whatever the row's columns say.

A row without its seal is never "not yet sealed": a request without a content seal or without
sealed rules, and a decision without a seal, fail the check like an edited one, whatever their
status. Rows stored before a revision sealed them (content before local_0002, rules and decisions
before local_0005) stay so until the operator seals them, once and explicitly
(:mod:`~mcp_approval.backends.local.seal_upgrade`, ``mcp-approval upgrade seal-requests``): no
server start seals, re-seals or repairs a row.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from mcp_approval.backends.local.rules import RequestRules

__all__ = [
    "NO_SEALED_RULES",
    "Grant",
    "RequestSeal",
    "approval_granted",
    "content_failure",
    "decision_document",
    "decision_failure",
    "decision_humans",
    "request_failure",
    "seal_decision",
    "sealed_content",
]

Row = Mapping[str, Any]

#: Why a request sealed before its rules were (revision local_0005), and not sealed since, fails.
NO_SEALED_RULES = "the stored request carries no sealed rules"


class RequestSeal(Protocol):
    """Keyed sealing of a document to one record (:class:`~mcp_approval.keyring.BindingCipher` is one).

    :meth:`open` raises on a ciphertext that does not authenticate for ``record``.
    """

    def seal(self, document: Mapping[str, Any], *, record: str) -> str:
        """``document`` sealed to ``record``."""
        ...

    def open(self, sealed: str, *, record: str) -> dict[str, Any]:
        """The document :meth:`seal` sealed to ``record``."""
        ...


@dataclass(frozen=True)
class Grant:
    """An approval the sealed decisions give: when it was completed and until when it may be used."""

    approved_at: int
    approved_until: int


def sealed_content(row: Row) -> dict[str, Any]:
    """What a request's seal covers: every stored member reviewers see or decisions depend on.

    A row stored before revision local_0005 has no ``rules_json``: its seal covers the rest.
    """
    content = {
        "idempotency_key": row["idempotency_key"],
        "body_sha256": hashlib.sha256(row["body_json"].encode()).hexdigest(),
        "tool_name": row["tool_name"],
        "requester": row["requester"],
        "template": row["template"],
        "approvals_required": row["approvals_required"],
        "expires_at": row["expires_at"],
    }
    if row.get("rules_json") is not None:
        content["rules"] = row["rules_json"]
        content["reviewer_role"] = row.get("reviewer_role")
    return content


def decision_document(decision: Row) -> dict[str, Any]:
    """What a decision's seal covers (a delegated one's delegator and delegation too: a decision
    recorded before delegations were has neither, and its seal covers the rest)."""
    document = {
        "reviewer": decision["reviewer"],
        "decision": decision["decision"],
        "comment": decision["comment"],
        "decided_at": decision["decided_at"],
    }
    if decision.get("on_behalf_of") is not None or decision.get("delegation_id") is not None:
        document["on_behalf_of"] = decision.get("on_behalf_of")
        document["delegation_id"] = decision.get("delegation_id")
    return document


def decision_humans(decision: Row) -> frozenset[str]:
    """The people a decision stands for: its reviewer, and the delegator it was made on behalf of."""
    behalf = decision.get("on_behalf_of")
    return frozenset({decision["reviewer"]} if behalf is None else {decision["reviewer"], behalf})


def _decision_record(request_id: str, reviewer: str) -> str:
    # Sealed to its request and reviewer: a decision copied to another request or reviewer fails.
    return f"{request_id}|decision|{reviewer}"


def seal_decision(seal: RequestSeal, decision: Row) -> str:
    """The seal of a decision row about to be stored (it names its ``request_id``)."""
    return seal.seal(decision_document(decision), record=_decision_record(decision["request_id"], decision["reviewer"]))


def decision_failure(seal: RequestSeal, decision: Row) -> str | None:
    """Why a decision row cannot be trusted as recorded (an unsealed one included), or ``None``."""
    shown = f"the decision of {decision['reviewer']}"
    if decision.get("seal") is None:
        return f"{shown} carries no seal"
    try:
        sealed = seal.open(decision["seal"], record=_decision_record(decision["request_id"], decision["reviewer"]))
    except Exception:  # any failure to authenticate is the same verdict
        return f"{shown} does not authenticate"
    if sealed != decision_document(decision):
        return f"{shown} does not match what was recorded"
    return None


def request_failure(seal: RequestSeal, row: Row, decisions: Sequence[Row]) -> str | None:
    """Why a request's rows cannot be trusted as written by the backend, or ``None``.

    Checks the content seal, that it covers the request's rules, every decision's seal and, for a
    request stored as approved, that its sealed decisions approve it under its sealed rules. A
    missing seal or missing rules fail like an edited row.
    """
    failure = content_failure(seal, row)
    if failure is not None:
        return failure
    for decision in decisions:
        failure = decision_failure(seal, decision)
        if failure is not None:
            return failure
    if row["status"] == "approved":
        rules = RequestRules.from_text(row["rules_json"])
        if approval_granted(rules, row["requester"], decisions) is None:
            return "the request is marked approved, but its decisions do not approve it under its rules"
    return None


def content_failure(seal: RequestSeal, row: Row) -> str | None:
    """Why a request row (its decisions aside) cannot be trusted as submitted, or ``None``."""
    if row.get("content_seal") is None:
        return "the stored request carries no seal"
    try:
        sealed = seal.open(row["content_seal"], record=row["request_id"])
    except Exception:  # any failure to authenticate is the same verdict: not what was submitted
        return "the stored request's seal does not authenticate"
    if sealed != sealed_content(row):
        return "the stored request does not match what was submitted"
    if row.get("rules_json") is None:
        return NO_SEALED_RULES
    try:
        RequestRules.from_text(row["rules_json"])
    except ValueError:
        return "the stored request's rules are unreadable"
    return None


def approval_granted(rules: RequestRules, requester: str, decisions: Sequence[Row]) -> Grant | None:
    """The approval ``decisions`` give under ``rules``, or ``None`` when they give none.

    Any denial gives none. Otherwise the approvals of distinct people count (the requester's
    only where the rules allow self-approval); the one that reaches ``approvals_required``
    completes the approval, which is usable for ``approval_valid_ms`` from then. A delegated
    approval stands for its delegate and its delegator at once: it counts once, and only when
    neither of them counted already; it never counts on a request either of them made.
    """
    if any(decision["decision"] == "deny" for decision in decisions):
        return None
    approvers: set[str] = set()
    counted = 0
    for decision in sorted(decisions, key=lambda d: (d["decided_at"], d["reviewer"])):
        humans = decision_humans(decision)
        if decision["decision"] != "approve" or humans & approvers:
            continue
        if requester in humans and (len(humans) > 1 or not rules.allow_self_approval):
            continue
        approvers |= humans
        counted += 1
        if counted >= rules.approvals_required:
            at = int(decision["decided_at"])
            return Grant(approved_at=at, approved_until=at + rules.approval_valid_ms)
    return None
