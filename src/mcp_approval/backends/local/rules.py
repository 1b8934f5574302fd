"""The local backend's rules: who decides a template's requests, and automatic deciders.

They are the ``[templates.NAME]`` and ``[[resolvers]]`` entries of a deployment file, and the
arguments :class:`~mcp_approval.backends.LocalApprovalBackend` takes in code; :class:`RequestRules`
are the rules a request was submitted under, stored with it (:func:`rules_of` reads them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["DEFAULT_TEMPLATE", "ApprovalTemplate", "RequestRules", "ResolverRule", "decided_by", "rules_of"]


class _Rules(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ApprovalTemplate(_Rules):
    """``[templates.NAME]``: who may decide requests of one policy template."""

    #: Distinct approvers a request needs; one denial ends it.
    approvals_required: int = Field(default=1, ge=1)
    #: The role a reviewer must hold to decide.
    reviewer_role: str = "approver"
    #: Whether the requester may decide their own request.
    allow_self_approval: bool = False
    #: How long an approval stays usable once granted.
    approval_valid_s: float = Field(default=3600.0, gt=0)
    #: Text fields the requester must supply before the request is submitted (e.g. a justification);
    #: asked through an MRTR ``input_required`` round on the original ``tools/call``.
    inputs: list[str] = Field(default_factory=list)
    #: When to ask for them: ``before`` (an MRTR round before the task exists) or ``during`` (the task
    #: starts ``input_required``; the answers arrive through ``tasks/update``, then it is submitted).
    collect_inputs: Literal["before", "during"] = "before"
    #: Whether a denying reviewer's comment reaches the requester, in the denial's text (never who
    #: wrote it). The text is model-facing: it is cut to one line and a few hundred characters.
    share_deny_comment: bool = False
    #: The ``[notifications.channels]`` told about this template's requests (opened, each decision,
    #: expired, cancelled, executed).
    notify: list[str] = Field(default_factory=list)
    #: How dangerous the template's calls are: ``"high"`` raises the bar where a channel can
    #: (an e-mail link then also needs the reviewer signed in, unless ``links_require_sign_in``
    #: says otherwise). ``"normal"`` changes nothing.
    risk: Literal["normal", "high"] = "normal"
    #: Whether a decision link (an e-mail's Approve / Deny) also needs the reviewer it was sent to
    #: signed in to the console; by default only for ``risk = "high"``.
    links_require_sign_in: bool | None = None
    #: A second factor each decision needs beyond the reviewer's sign-in: ``"passkey"`` (a WebAuthn
    #: assertion bound to the request's sealed digest and the decision, given in the console or the
    #: reviewer API); decisions without it, from any channel, are refused. ``None``: none.
    step_up: Literal["passkey"] | None = None

    #: Whether a reviewer approving a request may also write a similar-call rule that approves later
    #: calls like it (docs/reviewers.md, "Approving similar calls"). Templates needing more than one
    #: approval never allow them: one reviewer's rule would stand in for several people.
    similar_rules: bool = True
    #: The longest a similar-call rule of this template may last, from its creation.
    similar_rule_max_s: float = Field(default=86400.0, gt=0)
    #: The most calls a similar-call rule of this template may decide.
    similar_rule_max_uses: int = Field(default=1000, ge=1)
    #: Whether a reviewer of this template may hand their role for it to another reviewer for a
    #: period (docs/reviewers.md, "Delegation while away").
    delegation: bool = True
    #: The longest such a delegation may last, from its start.
    delegation_max_s: float = Field(default=14 * 86400.0, gt=0)
    #: Seconds after a request opens, still pending, when its reviewers are reminded on the
    #: template's ``notify`` channels (once; unset: no reminder).
    remind_after_s: float | None = Field(default=None, gt=0)
    #: Seconds after a request opens, still pending, when it is escalated to ``escalate_to``
    #: (once; needs ``escalate_to``).
    escalate_after_s: float | None = Field(default=None, gt=0)
    #: The role told when a request escalates (another role than ``reviewer_role``).
    escalate_to: str | None = Field(default=None, min_length=1)
    #: The ``[notifications.channels]`` that tell ``escalate_to`` (the template's ``notify`` if empty).
    escalate_notify: list[str] = Field(default_factory=list)
    #: Whether holders of ``escalate_to`` may decide the request once it escalated. The role and
    #: the time are sealed into the request's rules when it opens: a later edit of the template
    #: changes nothing for it.
    escalation_may_decide: bool = False

    @property
    def links_need_sign_in(self) -> bool:
        """Whether a decision link of this template needs its reviewer signed in (see ``links_require_sign_in``)."""
        return self.links_require_sign_in if self.links_require_sign_in is not None else self.risk == "high"

    @model_validator(mode="after")
    def _escalation(self) -> ApprovalTemplate:
        if (self.escalate_after_s is None) != (self.escalate_to is None):
            raise ValueError(
                "escalate_after_s and escalate_to go together: when to escalate, and to which role"
                if self.escalate_after_s is not None
                else "escalate_to needs escalate_after_s (when to escalate)"
            )
        if self.escalate_to is not None and self.escalate_to == self.reviewer_role:
            raise ValueError(f"escalate_to must name another role than reviewer_role ({self.reviewer_role!r})")
        if self.escalate_to is None and (self.escalate_notify or self.escalation_may_decide):
            raise ValueError("escalate_notify and escalation_may_decide need escalate_to and escalate_after_s")
        if self.remind_after_s is not None and not self.notify:
            raise ValueError("remind_after_s needs notify: the channels the reviewers are reminded on")
        if self.escalate_to is not None and not (self.escalate_notify or self.notify):
            raise ValueError("escalate_to needs escalate_notify (or notify): the channels that tell the role")
        if (
            self.remind_after_s is not None
            and self.escalate_after_s is not None
            and self.remind_after_s >= self.escalate_after_s
        ):
            raise ValueError(
                f"remind_after_s ({self.remind_after_s:g}) must come before escalate_after_s "
                f"({self.escalate_after_s:g}): the reviewers are reminded before the request goes over their heads"
            )
        return self

    def escalation_channels(self) -> list[str]:
        """The channels an escalation is told on: ``escalate_notify``, else ``notify``."""
        return list(self.escalate_notify or self.notify)


class ResolverRule(_Rules):
    """``[[resolvers]]``: an automatic decider for one template.

    Either a rule (approve when ``0 <= arguments[approve_if_argument] <= at_most``, deny otherwise) or
    a Python callable (``callable = "module:function"``).
    """

    #: The ``[templates.NAME]`` whose requests it decides.
    template: str
    #: Rule: the argument compared with ``at_most`` (missing, non-numeric or negative: deny).
    approve_if_argument: str | None = None
    #: Rule: the largest value approved.
    at_most: float | None = None
    #: ``module:function`` returning ``"approve"``, ``"deny"`` or ``None`` (leave it to reviewers).
    callable: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> ResolverRule:
        rule = self.approve_if_argument is not None or self.at_most is not None
        if rule and (self.approve_if_argument is None or self.at_most is None):
            raise ValueError("a rule resolver needs both approve_if_argument and at_most")
        if rule == (self.callable is not None):
            raise ValueError("a resolver is either a rule (approve_if_argument, at_most) or a callable")
        return self


@dataclass(frozen=True)
class RequestRules:
    """The decision rules a request was submitted under: stored and sealed with it.

    A request is decided by these, not by the configuration of the moment: a template edited,
    renamed or removed later changes nothing for the requests already open, and a reviewer surface
    that has no configuration (``mcp-approval review --db``) decides by them too.

    Attributes:
        reviewer_role: the role a reviewer must hold.
        approvals_required: distinct approvers needed; one denial ends the request.
        allow_self_approval: whether the requester may decide their own request.
        approval_valid_ms: how long an approval stays usable, from the decision that completed it.
        share_deny_comment: whether a denying reviewer's comment reaches the requester.
        step_up: the second factor each decision needs (``"passkey"``), or ``None``.
        escalation_role: a second role that may decide once the request escalated (``None``: none).
        escalation_after_ms: when it escalates, counted from the request's creation.
    """

    reviewer_role: str
    approvals_required: int
    allow_self_approval: bool
    approval_valid_ms: int
    share_deny_comment: bool
    step_up: str | None = None
    escalation_role: str | None = None
    escalation_after_ms: int | None = None

    def may_decide(self, roles: frozenset[str], *, created_at: int, now: int) -> bool:
        """Whether a reviewer holding ``roles`` may decide a request created at ``created_at`` now:
        the reviewer role, or the escalation role once the request escalated."""
        if self.reviewer_role in roles:
            return True
        escalated = self.escalates_at(created_at)
        return escalated is not None and self.escalation_role in roles and now >= escalated

    def escalates_at(self, created_at: int) -> int | None:
        """When the escalation role may start deciding a request created at ``created_at`` (``None``: never)."""
        if self.escalation_role is None or self.escalation_after_ms is None:
            return None
        return created_at + self.escalation_after_ms

    @classmethod
    def of(cls, template: ApprovalTemplate) -> RequestRules:
        """The rules ``template`` gives a request submitted now."""
        return cls(
            reviewer_role=template.reviewer_role,
            approvals_required=template.approvals_required,
            allow_self_approval=template.allow_self_approval,
            approval_valid_ms=round(template.approval_valid_s * 1000),
            share_deny_comment=template.share_deny_comment,
            step_up=template.step_up,
            escalation_role=template.escalate_to if template.escalation_may_decide else None,
            escalation_after_ms=round(template.escalate_after_s * 1000)
            if template.escalation_may_decide and template.escalate_after_s is not None
            else None,
        )

    def to_text(self) -> str:
        """The rules as the canonical JSON text stored (and sealed) with the request."""
        return json.dumps(self._members(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_text(cls, text: str) -> RequestRules:
        """The rules :meth:`to_text` wrote.

        Raises:
            ValueError: the text is not such a document.
        """
        try:
            members: Any = json.loads(text)
            rules = cls(**members)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"unreadable request rules ({exc})") from None
        kinds = (str, int, bool, int, bool)
        values = (
            rules.reviewer_role,
            rules.approvals_required,
            rules.allow_self_approval,
            rules.approval_valid_ms,
            rules.share_deny_comment,
        )
        if any(type(value) is not kind for value, kind in zip(values, kinds, strict=True)):
            raise ValueError("request rules have members of the wrong type")
        if rules.approvals_required < 1 or rules.approval_valid_ms < 1:
            raise ValueError("request rules need at least one approval and a positive validity")
        if rules.step_up not in (None, "passkey"):
            raise ValueError("request rules name an unknown step-up")
        if (rules.escalation_role is None) != (rules.escalation_after_ms is None):
            raise ValueError("request rules name an escalation role without its time, or a time without a role")
        if rules.escalation_role is not None and (
            type(rules.escalation_role) is not str
            or type(rules.escalation_after_ms) is not int
            or (rules.escalation_after_ms or 0) < 1
        ):
            raise ValueError("request rules have an escalation of the wrong type")
        if rules.to_text() != text:
            raise ValueError("request rules are not in their canonical form")
        return rules

    def _members(self) -> dict[str, Any]:
        members: dict[str, Any] = {
            "reviewer_role": self.reviewer_role,
            "approvals_required": self.approvals_required,
            "allow_self_approval": self.allow_self_approval,
            "approval_valid_ms": self.approval_valid_ms,
            "share_deny_comment": self.share_deny_comment,
        }
        if self.step_up is not None:  # absent otherwise: rules stored before step-up keep their text
            members["step_up"] = self.step_up
        # Only when set, so the rules of every request without an escalation read as before.
        if self.escalation_role is not None:
            members["escalation_role"] = self.escalation_role
            members["escalation_after_ms"] = self.escalation_after_ms
        return members


#: Requests that name no template: one approver holding "approver", no self-approval. A request
#: naming a template that is not configured is refused (it never falls back to this one).
DEFAULT_TEMPLATE = ApprovalTemplate()


def rules_of(row: Mapping[str, Any], templates: Mapping[str, ApprovalTemplate]) -> RequestRules | None:
    """The rules a request is decided by: those stored with it, else (a row stored before rules
    were) its template's as configured now, else ``None`` (its template is gone: nobody decides it).

    Raises:
        ValueError: the stored rules are unreadable.
    """
    if row.get("rules_json") is not None:
        return RequestRules.from_text(row["rules_json"])
    name = row["template"]
    if not name:
        return RequestRules.of(DEFAULT_TEMPLATE)
    template = templates.get(name)
    return None if template is None else RequestRules.of(template)


def decided_by(row: Mapping[str, Any], templates: Mapping[str, ApprovalTemplate]) -> RequestRules | None:
    """:func:`rules_of`, with ``None`` for unreadable rules too: nobody may decide by edited rules
    (the integrity check names them)."""
    try:
        return rules_of(row, templates)
    except ValueError:
        return None
