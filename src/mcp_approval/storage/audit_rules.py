"""What ``audit verify`` checks beyond the chain: every execution follows the decisions its request needed.

Someone who can write the database can make a call run without a reviewer (flip a pending
request's status to ``approved``): the server then records a genuine, well-linked execution.
The chain alone holds; what gives it away is that no decisions allowing it were recorded.

:class:`ExecutionRules` reads the events in chain order. A local request's ``approval.submitted``
event records its rules (``approvals_required``, ``self_approval``) and its requester (the actor);
each ``approval.decision`` adds a reviewer's verdict. An execution event (``approval.execution_claimed``
or ``approval.execution_finished``) names the backend request it follows (``backend``, ``request``);
for a ``local`` request it must come after a submission and enough approvals from distinct
eligible reviewers, and no denial, and be of the call that was submitted (the same
``call_digest``: a task pointed at another call's request is named too). Requests of other
backends (an ARAP service keeps its own decisions) and events written before executions named
their request are not checked.

A decision a similar-call rule made (an ``approval.decision`` whose data names ``similar_rule``)
must come after the rule's ``approval.similar_rule_created`` event, before any
``approval.similar_rule_revoked`` event of it, and within the use count the creation recorded;
each is collected as a :class:`RuleDecision`, so ``audit verify`` names the rule behind every
automatic decision.

A decision made under a delegation (an ``approval.decision`` whose data names ``delegation`` and
``on_behalf_of``) must come after the delegation's ``approval.delegation_created`` event, before
any ``approval.delegation_revoked`` event of it, within the period the creation recorded, by its
delegate and on behalf of its delegator; it counts once for both of them (each person counts once
toward ``approvals_required``, and never on their own request).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["EXECUTION_KINDS", "ExecutionRules", "RuleDecision"]

#: The events that record a call running.
EXECUTION_KINDS = frozenset({"approval.execution_claimed", "approval.execution_finished"})
#: The backend whose decisions this audit log holds.
_LOCAL = "local"
#: Events after which a request can no longer allow an execution (its state is dropped).
_CLOSED = frozenset({"approval.denied", "approval.expired", "approval.cancelled"})


@dataclass
class _Request:
    requester: str | None
    required: int
    self_approval: bool
    call_digest: str | None = None
    approvers: set[str] = field(default_factory=set)
    denied_by: str | None = None
    counted: int = 0


@dataclass(frozen=True)
class RuleDecision:
    """A decision a similar-call rule made, as the audit log records it.

    Attributes:
        request: the request it decided.
        rule: the rule's id.
        author: the reviewer who wrote the rule.
        decision: its verdict (``approve``).
    """

    request: str
    rule: str
    author: str
    decision: str


@dataclass
class _Delegation:
    delegator: str | None
    delegate: object
    starts_at: object
    ends_at: object
    revoked_by: str | None = None


@dataclass
class _Rule:
    author: str | None
    max_uses: int
    uses: int = 0
    revoked_by: str | None = None


class ExecutionRules:
    """Follows requests through their events; names an execution their decisions do not allow,
    and a similar-call rule's decision its rule did not allow.

    Attributes:
        rule_decisions: the similar-call rules' decisions seen so far, in chain order.
    """

    def __init__(self) -> None:
        self._requests: dict[str, _Request] = {}
        self._rules: dict[str, _Rule] = {}
        self._delegations: dict[str, _Delegation] = {}
        self.rule_decisions: list[RuleDecision] = []

    def fault(
        self, kind: str, subject: str | None, actor: str | None, data: dict[str, Any], at: int | None = None
    ) -> str | None:
        """Take in the next event of the chain (recorded at ``at``, epoch ms); why it is an execution
        its request does not allow (or a rule's or a delegate's decision its rule or delegation does
        not), or ``None``."""
        if kind == "approval.delegation_created" and subject is not None:
            self._delegations[subject] = _Delegation(
                actor, data.get("delegate"), data.get("starts_at"), data.get("ends_at")
            )
        elif kind == "approval.delegation_revoked" and subject in self._delegations:
            self._delegations[subject].revoked_by = actor or "?"
        elif kind == "approval.decision" and "delegation" in data:
            fault = self._delegated(subject, actor, data, at)
            if fault is not None:
                return fault
            if subject in self._requests:
                self._decided(self._requests[subject], actor, data.get("decision"), data.get("on_behalf_of"))
        elif kind == "approval.submitted" and subject is not None:
            self._submitted(subject, actor, data)
        elif kind == "approval.similar_rule_created" and subject is not None:
            uses = data.get("max_uses")
            self._rules[subject] = _Rule(actor, uses if isinstance(uses, int) else 0)
        elif kind == "approval.similar_rule_revoked" and subject in self._rules:
            self._rules[subject].revoked_by = actor or "?"
        elif kind == "approval.decision" and "similar_rule" in data:
            fault = self._by_rule(subject, data)
            if fault is not None:
                return fault
            if subject in self._requests:
                self._decided(self._requests[subject], actor, data.get("decision"))
        elif kind == "approval.decision" and subject in self._requests:
            self._decided(self._requests[subject], actor, data.get("decision"))
        elif kind in _CLOSED:
            self._requests.pop(subject or "", None)
        elif kind in EXECUTION_KINDS and data.get("backend") == _LOCAL:
            return self._unallowed(data.get("request"), data.get("call_digest"))
        return None

    def _by_rule(self, request_id: str | None, data: dict[str, Any]) -> str | None:
        rule_id = str(data.get("similar_rule"))
        rule = self._rules.get(rule_id)
        shown = f"the decision of request {(request_id or '?')[:12]}… by similar-call rule {rule_id}"
        if rule is None:
            return f"{shown}: no such rule was created before it"
        if rule.revoked_by is not None:
            return f"{shown}: the rule was revoked by {rule.revoked_by} before it"
        if rule.uses >= rule.max_uses:
            return f"{shown}: the rule had already made its {rule.max_uses} decision(s)"
        rule.uses += 1
        author = data.get("rule_author")
        self.rule_decisions.append(
            RuleDecision(request_id or "?", rule_id, str(author or rule.author), str(data.get("decision")))
        )
        return None

    def _delegated(self, request_id: str | None, actor: str | None, data: dict[str, Any], at: int | None) -> str | None:
        delegation_id = str(data.get("delegation"))
        grant = self._delegations.get(delegation_id)
        shown = (
            f"the decision of request {(request_id or '?')[:12]}… by {actor} for {data.get('on_behalf_of')} "
            f"under delegation {delegation_id}"
        )
        if grant is None:
            return f"{shown}: no such delegation was created before it"
        if grant.revoked_by is not None:
            return f"{shown}: the delegation was revoked by {grant.revoked_by} before it"
        if actor != grant.delegate or data.get("on_behalf_of") != grant.delegator:
            return f"{shown}: the delegation is from {grant.delegator} to {grant.delegate}"
        starts, ends = grant.starts_at, grant.ends_at
        if at is not None and isinstance(starts, int) and isinstance(ends, int) and not starts <= at < ends:
            return f"{shown}: it was made outside the delegation's period"
        return None

    def _submitted(self, request_id: str, requester: str | None, data: dict[str, Any]) -> None:
        required = data.get("approvals_required", 1)
        self._requests[request_id] = _Request(
            requester=requester,
            required=required if isinstance(required, int) and required >= 1 else 1,
            self_approval=data.get("self_approval") is True,
            call_digest=data.get("call_digest") if isinstance(data.get("call_digest"), str) else None,
        )

    @staticmethod
    def _decided(request: _Request, reviewer: str | None, decision: object, on_behalf_of: object = None) -> None:
        if reviewer is None:
            return
        humans = {reviewer} if not isinstance(on_behalf_of, str) else {reviewer, on_behalf_of}
        if decision == "deny":
            request.denied_by = reviewer
        elif decision == "approve" and not humans & request.approvers:
            if request.requester in humans and (len(humans) > 1 or not request.self_approval):
                return
            request.approvers |= humans
            request.counted += 1

    def _unallowed(self, request_id: object, call_digest: object) -> str | None:
        if not isinstance(request_id, str):
            return "it names no approval request it follows: it ran without a recorded approval"
        shown = f"request {request_id[:12]}…"
        request = self._requests.get(request_id)
        if request is None:
            return f"{shown} was never submitted, or had ended without approval, before this execution"
        if request.call_digest is not None and isinstance(call_digest, str) and call_digest != request.call_digest:
            return f"{shown} was submitted for another call than the one this execution ran"
        if request.denied_by is not None:
            return f"{shown} was denied by {request.denied_by} before this execution"
        if request.counted < request.required:
            return (
                f"{shown} needed {request.required} approval(s) from reviewers other than its requester, "
                f"but {request.counted} were recorded before this execution: it ran without them"
            )
        return None
