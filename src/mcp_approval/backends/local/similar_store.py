"""Similar-call rules at work: writing one while approving, revoking, listing, and deciding later
requests by them.

Each later call is still its own request. It is submitted as any other; a rule decides it as an
automatic decision recorded under ``similar-rule:<id>`` (the audit events name the rule and its
author); the server then re-evaluates the call against current policy with that approval as an
input, as it does for every approval (SEP-2848: an approval is an input to a new decision, never a
standing grant). A request no rule may decide (outside every scope, past expiry, over the use
count, revoked, by a principal the scope leaves out, by the rule's own author, or a rule whose row
fails its seal) stays pending for people.

The use count is consumed in the decision's own transaction by a compare-and-set
(``uses = uses + 1 WHERE uses < max_uses``), so concurrent matching calls on any number of
workers never exceed it; a decision that does not commit consumes nothing.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, bindparam, select, update

from mcp_approval.backends.contract import ApprovalSubmission, UnknownRequestError
from mcp_approval.backends.local.decisions import Decisions
from mcp_approval.backends.local.errors import NotEligibleError, ReviewError
from mcp_approval.backends.local.listing import AUDITOR_ROLE
from mcp_approval.backends.local.records import ApprovalRecord
from mcp_approval.backends.local.rows import Row, fetch
from mcp_approval.backends.local.rules import DEFAULT_TEMPLATE, ApprovalTemplate, RequestRules, decided_by
from mcp_approval.backends.local.schema import similar_call_rules_table
from mcp_approval.backends.local.seals import RequestSeal
from mcp_approval.backends.local.similar import SimilarCallScope, SimilarRuleError, rule_actor
from mcp_approval.backends.local.similar_rows import (
    RuleDecision,
    SimilarCallRule,
    decided_by_rule,
    decisions_by,
    fetch_rule,
    rule_failure,
    seal_rule,
)
from mcp_approval.clock import Clock
from mcp_approval.storage.audit import AuditLog
from mcp_approval.storage.database import Database

__all__ = ["RULE_CREATED", "RULE_REVOKED", "SimilarCallRules", "SimilarRuleSpec"]

_S = similar_call_rules_table
#: One live rule of a tool, if any (built once: this runs in every gated creation).
_ANY_LIVE_RULE = (
    select(_S.c.rule_id)
    .where(
        _S.c.tool_name == bindparam("tool"),
        _S.c.expires_at > bindparam("now"),
        _S.c.revoked_at.is_(None),
        _S.c.uses < _S.c.max_uses,
    )
    .limit(1)
)
#: The audit events of a rule's life (its decisions are ``approval.decision`` events naming it).
RULE_CREATED = "approval.similar_rule_created"
RULE_REVOKED = "approval.similar_rule_revoked"


class _RuleSpentError(ReviewError):
    """The rule was revoked, expired or used up between matching and deciding: the decision rolls back."""


@dataclass(frozen=True)
class SimilarRuleSpec:
    """What a reviewer asks for when approving "this, and calls like it".

    Attributes:
        expires_in_s: how long the rule lasts (required; at most the template's ``similar_rule_max_s``).
        max_uses: how many later calls it may decide (at most the template's ``similar_rule_max_uses``).
        same_principal: only calls by the same requester (otherwise any requester).
        conditions: argument name → condition (``{"equal": v}``, ``{"one_of": [...]}``,
            ``{"range": [lo, hi]}``, ``{"prefix": "s"}``); unnamed arguments must stay equal.
    """

    expires_in_s: float
    max_uses: int
    same_principal: bool = True
    conditions: Mapping[str, object] = field(default_factory=dict)

    @classmethod
    def from_json(cls, document: object) -> SimilarRuleSpec:
        """The spec of the reviewer API's ``similar`` member.

        Raises:
            SimilarRuleError: naming the member that is missing or malformed.
        """
        if not isinstance(document, dict):
            raise SimilarRuleError("'similar' must be an object")
        unknown = sorted(set(document) - {"expires_in_s", "max_uses", "principal", "arguments"})
        if unknown:
            raise SimilarRuleError(f"'similar' has an unknown member {unknown[0]!r}")
        expires = document.get("expires_in_s")
        if isinstance(expires, bool) or not isinstance(expires, int | float) or not expires > 0:
            raise SimilarRuleError("'similar.expires_in_s' is required: a positive number of seconds")
        uses = document.get("max_uses")
        if isinstance(uses, bool) or not isinstance(uses, int) or uses < 1:
            raise SimilarRuleError("'similar.max_uses' is required: a whole number of at least 1")
        principal = document.get("principal", "same")
        if principal not in ("same", "any"):
            raise SimilarRuleError("'similar.principal' must be 'same' or 'any'")
        conditions = document.get("arguments", {})
        if not isinstance(conditions, dict):
            raise SimilarRuleError("'similar.arguments' must be an object: argument name -> condition")
        return cls(float(expires), uses, principal == "same", conditions)


class SimilarCallRules:
    """Writes, revokes and lists similar-call rules, and decides requests by them.

    Args:
        database: the database the requests and rules are kept in.
        clock: the source of time.
        audit: where rules' lives are recorded (their decisions are recorded by ``decisions``).
        templates: the configured templates (whether, and how long, their requests may have rules).
        roles: the roles a reviewer holds (who may revoke and see a rule).
        seal: seals each rule row; without it no rule is written, and none decides.
        decisions: records the approvals.
        redact: argument names reviewers see as ``"[redacted]"`` (a scope cannot name them).
    """

    def __init__(
        self,
        database: Database,
        clock: Clock,
        audit: AuditLog,
        templates: Mapping[str, ApprovalTemplate],
        roles: Callable[[str], frozenset[str]],
        seal: RequestSeal | None,
        decisions: Decisions,
        redact: Collection[str],
    ) -> None:
        self._db = database
        self._clock = clock
        self._audit = audit
        self._templates = templates
        self._roles = roles
        self._seal = seal
        self._decisions = decisions
        self._redact = frozenset(redact)

    def _template(self, name: str | None) -> ApprovalTemplate | None:
        return DEFAULT_TEMPLATE if not name else self._templates.get(name)

    def applies(self, template: str | None) -> bool:
        """Whether requests of ``template`` may be decided by rules (as it is configured now)."""
        configured = self._template(template)
        return self._seal is not None and configured is not None and configured.similar_rules

    def limits(self, template: str | None, rules: RequestRules | None) -> tuple[float, int] | None:
        """The longest a rule written on a request of ``template`` (decided by ``rules``) may last, in
        seconds, and the most calls it may decide; ``None`` when no rule may be written on it."""
        configured = self._template(template)
        if self._seal is None or configured is None or not configured.similar_rules:
            return None
        if configured.approvals_required > 1 or rules is None or rules.approvals_required > 1:
            return None
        if rules.step_up is not None:  # each decision needs a second factor a rule's author cannot give later calls
            return None
        return configured.similar_rule_max_s, configured.similar_rule_max_uses

    # -- writing, revoking, listing ------------------------------------------------------------

    async def approve_similar(
        self, request_id: str, reviewer: str, spec: SimilarRuleSpec, comment: str | None
    ) -> tuple[ApprovalRecord, SimilarCallRule]:
        """Approve the request as ``reviewer`` and, in the same transaction, write the rule ``spec`` asks for.

        Raises:
            SimilarRuleError: the template forbids rules, the scope does not fit the request, the
                expiry or use count is above the template's limits, or there is no binding key.
            UnknownRequestError, ReviewError: as :meth:`Decisions.decide` (nothing is written).
        """
        row = await self._db.read(lambda conn: fetch(conn, request_id))
        if row is None:
            raise UnknownRequestError(f"no approval request {request_id[:8]}…")
        # Who may not decide the request learns nothing of its template's limits.
        self._decisions.check_eligible(row, reviewer)
        self._allowed_template(row, spec)
        body = json.loads(row["body_json"])
        named_redacted = sorted(set(spec.conditions) & self._redact)
        if named_redacted:
            raise SimilarRuleError(f"argument {named_redacted[0]!r} is redacted: a scope cannot widen what it hides")
        scope = SimilarCallScope.chosen(
            tool=row["tool_name"],
            template=row["template"],
            requester=row["requester"],
            arguments=body.get("arguments", {}),
            same_principal=spec.same_principal,
            conditions=spec.conditions,
        )
        rule_id = "sim_" + secrets.token_urlsafe(16)
        seal = self._seal
        assert seal is not None  # _allowed_template refuses without one
        expires_in_ms = round(spec.expires_in_s * 1000)

        def write_rule(conn: Connection, request: Row, now: int) -> Mapping[str, Any]:
            values: dict[str, Any] = {
                "rule_id": rule_id,
                "template": request["template"],
                "tool_name": request["tool_name"],
                "author": reviewer,
                "source_request": request_id,
                "scope_json": scope.to_text(),
                "created_at": now,
                "expires_at": now + expires_in_ms,
                "max_uses": spec.max_uses,
                "uses": 0,
            }
            values["seal"] = seal_rule(seal, values)
            conn.execute(_S.insert(), values)
            data = {
                "source_request": request_id,
                "template": request["template"],
                "tool": request["tool_name"],
                "principal": scope.principal,
                "expires_at": values["expires_at"],
                "max_uses": spec.max_uses,
                "scope": scope.describe(self._redact),
            }
            self._audit.record_in(conn, now, RULE_CREATED, subject=rule_id, actor=reviewer, data=data)
            return {"writes_similar_rule": rule_id}

        record = await self._decisions.decide(request_id, reviewer, "approve", comment, within=write_rule)
        rule = await self.get(rule_id)
        assert rule is not None  # written with the approval
        return record, rule

    def _allowed_template(self, row: Row, spec: SimilarRuleSpec) -> None:
        name = row["template"] or "(default)"
        template = self._template(row["template"])
        if self._seal is None:
            raise SimilarRuleError("similar-call rules are sealed under the server's binding keys, not given here")
        if template is None:
            raise SimilarRuleError(f"template {name!r} is not configured here, so its limits on rules are unknown")
        if not template.similar_rules:
            raise SimilarRuleError(f"template {name!r} forbids similar-call rules (similar_rules = false)")
        rules = decided_by(row, self._templates)
        if template.approvals_required > 1 or (rules is not None and rules.approvals_required > 1):
            raise SimilarRuleError(
                f"template {name!r} needs several approvals: one reviewer's rule cannot stand in for them"
            )
        if spec.expires_in_s > template.similar_rule_max_s:
            raise SimilarRuleError(
                f"a rule of template {name!r} lasts at most {template.similar_rule_max_s:g} s, "
                f"not {spec.expires_in_s:g} s"
            )
        if spec.max_uses > template.similar_rule_max_uses:
            raise SimilarRuleError(
                f"a rule of template {name!r} decides at most {template.similar_rule_max_uses} calls, "
                f"not {spec.max_uses}"
            )

    async def revoke(self, rule_id: str, principal: str) -> SimilarCallRule:
        """Revoke the rule at once: it decides no further call, pending ones included.

        Raises:
            SimilarRuleError: no such rule (or not one ``principal`` may see), or already ended by revocation.
            NotEligibleError: ``principal`` neither wrote the rule nor holds its template's reviewer role.
        """
        now = self._clock.now_ms()

        def revoke(conn: Connection) -> None:
            row = fetch_rule(conn, rule_id, lock=True)
            if row is None or not self._may_see(principal, row):
                raise SimilarRuleError(f"no similar-call rule {rule_id!r}")
            if not self._may_revoke(principal, row):
                raise NotEligibleError(f"{principal} may not revoke rule {rule_id!r}")
            if row["revoked_at"] is not None:
                raise SimilarRuleError(f"rule {rule_id!r} was already revoked by {row['revoked_by']}")
            statement = update(_S).where(_S.c.rule_id == rule_id, _S.c.revoked_at.is_(None))
            conn.execute(statement.values(revoked_at=now, revoked_by=principal))
            self._audit.record_in(conn, now, RULE_REVOKED, subject=rule_id, actor=principal, data={})

        await self._db.write(revoke)
        rule = await self.get(rule_id)
        assert rule is not None
        return rule

    async def get(self, rule_id: str, *, viewer: str | None = None) -> SimilarCallRule | None:
        """One rule, checked against its seal, as ``viewer`` may see it (``None`` if not)."""
        row = await self._db.read(lambda conn: fetch_rule(conn, rule_id))
        if row is None or (viewer is not None and not self._may_see(viewer, row)):
            return None
        return SimilarCallRule.of(row, rule_failure(self._seal, row), self._clock.now_ms(), self._redact)

    async def listed(self, *, viewer: str | None = None, active_only: bool = False) -> list[SimilarCallRule]:
        """The rules (newest first) ``viewer`` may see: its own, and its templates' (every one without a viewer)."""
        rows = await self._db.read(
            lambda conn: [dict(row) for row in conn.execute(select(_S).order_by(_S.c.created_at.desc())).mappings()]
        )
        now = self._clock.now_ms()
        rules = [
            SimilarCallRule.of(row, rule_failure(self._seal, row), now, self._redact)
            for row in rows
            if viewer is None or self._may_see(viewer, row)
        ]
        return [rule for rule in rules if not active_only or rule.state() == "active"]

    async def decided(self, rule_id: str, *, viewer: str | None = None) -> list[RuleDecision] | None:
        """The calls the rule decided, newest first, or ``None`` when ``viewer`` may not see the rule."""

        def read(conn: Connection) -> list[RuleDecision] | None:
            row = fetch_rule(conn, rule_id)
            if row is None or (viewer is not None and not self._may_see(viewer, row)):
                return None
            return decided_by_rule(conn, rule_id)

        return await self._db.read(read)

    def _may_revoke(self, principal: str, row: Row) -> bool:
        template = self._template(row["template"])
        return principal == row["author"] or (template is not None and template.reviewer_role in self._roles(principal))

    def _may_see(self, principal: str, row: Row) -> bool:
        return self._may_revoke(principal, row) or AUDITOR_ROLE in self._roles(principal)

    # -- deciding ------------------------------------------------------------------------------

    def may_decide_in(self, conn: Connection, submission: ApprovalSubmission) -> bool:
        """Whether a live rule of ``submission``'s tool exists, read in the caller's transaction.

        Asked while a gated call is created: most creations find none and then spend no read of
        their own on the rules. A rule committed after this look was written after the request and
        could not decide it anyway (:meth:`decide` takes only rules written before it).
        """
        if not self.applies(submission.template):
            return False
        parameters = {"tool": submission.tool, "now": self._clock.now_ms()}
        return conn.execute(_ANY_LIVE_RULE, parameters).first() is not None

    async def live_tools(self) -> set[str]:
        """The tools some rule not revoked, expired or used up may still decide calls of."""
        now = self._clock.now_ms()
        query = select(_S.c.tool_name).where(
            _S.c.expires_at > now, _S.c.revoked_at.is_(None), _S.c.uses < _S.c.max_uses
        )
        return await self._db.read(lambda conn: {str(tool) for tool in conn.execute(query.distinct()).scalars()})

    async def decide(self, request_id: str) -> str | None:
        """Approve the pending request by the first rule that may decide it; that rule's id, or ``None``."""
        # The request and the rules that could decide it in one read: every gated creation of a
        # template that allows rules comes here, most of them to find none.
        row, candidates = await self._db.read(lambda conn: self._request_and_candidates(conn, request_id))
        if row is None or not candidates:
            return None
        submission = ApprovalSubmission.from_json(json.loads(row["body_json"]))
        for rule in candidates:
            if not await self._may_decide(rule, row, submission):
                continue
            try:
                await self._decisions.decide(
                    request_id,
                    rule_actor(rule["rule_id"]),
                    "approve",
                    f"approved by similar-call rule {rule['rule_id']} of {rule['author']}",
                    automatic=True,
                    within=self._consuming(rule["rule_id"]),
                )
            except _RuleSpentError:
                continue  # revoked, expired or used up meanwhile: another rule, or people
            except (ReviewError, UnknownRequestError):
                return None  # decided, expired or withdrawn meanwhile, or unverifiable: people see it
            return str(rule["rule_id"])
        return None

    def _request_and_candidates(self, conn: Connection, request_id: str) -> tuple[Row | None, list[dict[str, Any]]]:
        """The pending request ``request_id`` (``None`` if it is not, or rules may not decide it) and
        the live rules of its tool written before it, oldest first."""
        row = fetch(conn, request_id)
        if row is None or row["status"] != "pending" or not self.applies(row["template"]):
            return None, []
        query = (
            select(_S)
            .where(
                _S.c.tool_name == row["tool_name"],
                _S.c.expires_at > self._clock.now_ms(),
                _S.c.revoked_at.is_(None),
                _S.c.uses < _S.c.max_uses,
                _S.c.created_at <= row["created_at"],
            )
            .order_by(_S.c.created_at)
        )
        return row, [dict(rule) for rule in conn.execute(query).mappings()]

    async def _may_decide(self, rule: Row, request: Row, submission: ApprovalSubmission) -> bool:
        if rule["template"] != request["template"]:
            return False
        failure = rule_failure(self._seal, rule)
        if failure is not None:  # an edited rule decides nothing, and says so
            data = {"why": failure, "request": request["request_id"]}
            await self._audit.record("approval.similar_rule_unverified", subject=rule["rule_id"], data=data)
            return False
        scope = SimilarCallScope.from_text(rule["scope_json"])
        outside = scope.why_outside(
            tool=submission.tool,
            template=submission.template,
            requester=submission.requester,
            arguments=submission.arguments,
        )
        if outside is not None:
            return False
        rules = decided_by(request, self._templates)
        if rules is None or (submission.requester == rule["author"] and not rules.allow_self_approval):
            return False  # a reviewer's rule never approves their own calls where they could not
        # A revocation on record counts even if the row's column was cleared since.
        events = await self._audit.events(subject=rule["rule_id"])
        return not any(event.kind == RULE_REVOKED for event in events)

    def _consuming(self, rule_id: str) -> Callable[[Connection, Row, int], Mapping[str, Any]]:
        def consume(conn: Connection, request: Row, now: int) -> Mapping[str, Any]:
            rule = fetch_rule(conn, rule_id, lock=True)
            if rule is None or rule_failure(self._seal, rule) is not None:
                raise _RuleSpentError(f"rule {rule_id} is gone or fails its seal")
            if decisions_by(conn, rule_id) >= rule["max_uses"]:
                raise _RuleSpentError(f"rule {rule_id} has recorded all its decisions")
            statement = (
                update(_S)
                .where(
                    _S.c.rule_id == rule_id,
                    _S.c.revoked_at.is_(None),
                    _S.c.expires_at > now,
                    _S.c.uses < _S.c.max_uses,
                )
                .values(uses=_S.c.uses + 1)
            )
            if conn.execute(statement).rowcount != 1:
                raise _RuleSpentError(f"rule {rule_id} was revoked, expired or used up")
            return {"similar_rule": rule_id, "rule_author": rule["author"]}

        return consume
