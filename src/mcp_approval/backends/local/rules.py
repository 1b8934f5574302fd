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

    @property
    def links_need_sign_in(self) -> bool:
        """Whether a decision link of this template needs its reviewer signed in (see ``links_require_sign_in``)."""
        return self.links_require_sign_in if self.links_require_sign_in is not None else self.risk == "high"

    #: Whether a reviewer approving a request may also write a similar-call rule that approves later
    #: calls like it (docs/reviewers.md, "Approving similar calls"). Templates needing more than one
    #: approval never allow them: one reviewer's rule would stand in for several people.
    similar_rules: bool = True
    #: The longest a similar-call rule of this template may last, from its creation.
    similar_rule_max_s: float = Field(default=86400.0, gt=0)
    #: The most calls a similar-call rule of this template may decide.
    similar_rule_max_uses: int = Field(default=1000, ge=1)


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
    """

    reviewer_role: str
    approvals_required: int
    allow_self_approval: bool
    approval_valid_ms: int
    share_deny_comment: bool
    step_up: str | None = None

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
