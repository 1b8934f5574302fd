"""The approval backend contract (SEP-2848 §Relationship to existing specifications).

A backend accepts an approval request idempotently under a caller-supplied submission key,
returns a durable, resumable handle, resolves the request out of band into a terminal state and,
on a grant, returns approval material the server feeds into a *new* policy decision. The server,
never the backend, decides whether the call runs.

Backends: :class:`~mcp_approval.backends.LocalApprovalBackend` (durable in the server's own
database, reviewers decide over HTTP or the CLI) and the ARAP HTTP backend. What a backend may
offer beyond this contract, and the server asks for, is in :mod:`mcp_approval.backends.capabilities`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any, Protocol

import rfc8785

from mcp_approval.clock import iso8601
from mcp_approval.errors import MCPApprovalError

__all__ = [
    "ApprovalBackend",
    "ApprovalBackendError",
    "ApprovalState",
    "ApprovalStatus",
    "ApprovalSubmission",
    "DeniedEvaluation",
    "EarlierCall",
    "IdempotencyConflictError",
    "RequestIntegrityError",
    "SealedRequest",
    "StatusListener",
    "SubmissionRejectedError",
    "UnknownRequestError",
]


class ApprovalStatus(StrEnum):
    """Where an approval request stands. Everything but ``pending`` is terminal."""

    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        """Whether the request can no longer change."""
        return self is not ApprovalStatus.PENDING


#: Decision members an Access Request echoes, from ``context`` and from ``context.access_request``
#: (ARAP §2.3 ``denial``), and the URLs a requestable denial may name.
_CONTEXT_DENIAL_MEMBERS = ("evaluation_id", "evaluated_at", "reason")
_HINT_DENIAL_MEMBERS = ("expires_at", "template", "binding_token")
_HINT_URLS = ("endpoint", "request_schema_url", "request_catalogs_url", "form_url")


@dataclass(frozen=True)
class DeniedEvaluation:
    """The denied AuthZEN evaluation a submission stems from, for backends that speak ARAP.

    Backends that do not need it (the local one) ignore it. Every member is carried exactly as
    the policy decision point sent it: ``denial`` holds the raw members an Access Request echoes
    (``expires_at``, ``evaluation_id``, ``evaluated_at``, ``reason``, ``template``,
    ``binding_token``), absent ones absent, never decoded or reformatted.

    Attributes:
        subject: the evaluation's ``subject`` (wire form).
        resource: the evaluation's ``resource``.
        action: the evaluation's ``action``.
        context: the evaluation *request's* context (not the decision context), if any.
        denial: the denial members to echo, exactly as received.
        endpoint: ``access_request.endpoint`` as the decision named it, if it did.
        request_schema_url: ``access_request.request_schema_url``, if named.
        request_catalogs_url: ``access_request.request_catalogs_url``, if named.
        form_url: ``access_request.form_url``, if named.
    """

    subject: Mapping[str, Any]
    resource: Mapping[str, Any]
    action: Mapping[str, Any]
    denial: Mapping[str, Any]
    context: Mapping[str, Any] | None = None
    endpoint: str | None = None
    request_schema_url: str | None = None
    request_catalogs_url: str | None = None
    form_url: str | None = None

    _OPTIONAL = ("context", "endpoint", "request_schema_url", "request_catalogs_url", "form_url")

    def to_json(self) -> dict[str, Any]:
        """The evaluation as a JSON object (absent members omitted)."""
        body: dict[str, Any] = {
            "subject": dict(self.subject),
            "resource": dict(self.resource),
            "action": dict(self.action),
            "denial": dict(self.denial),
        }
        for name in self._OPTIONAL:
            value = getattr(self, name)
            if value is not None:
                body[name] = dict(value) if isinstance(value, Mapping) else value
        return body

    @classmethod
    def from_decision(
        cls, request: Mapping[str, Any], decision_context: Mapping[str, Any] | None
    ) -> DeniedEvaluation | None:
        """The denied evaluation behind a requestable denial, or ``None`` when it is not requestable.

        ``request`` is the evaluation request as sent (wire form); ``decision_context`` the decision's
        context. Only ``context.access_request`` (an object with ``expires_at``) makes a denial
        requestable (ARAP §2.2); every echoed member is copied as is, absent ones stay absent.
        """
        context = decision_context or {}
        hint = context.get("access_request")
        if not isinstance(hint, Mapping) or "expires_at" not in hint:
            return None
        denial: dict[str, Any] = {name: hint[name] for name in _HINT_DENIAL_MEMBERS if name in hint}
        denial.update({name: context[name] for name in _CONTEXT_DENIAL_MEMBERS if name in context})
        urls = {name: hint[name] for name in _HINT_URLS if isinstance(hint.get(name), str)}
        evaluated = request.get("context")
        return cls(
            subject=dict(request["subject"]),
            resource=dict(request["resource"]),
            action=dict(request["action"]),
            denial=denial,
            context=dict(evaluated) if isinstance(evaluated, Mapping) else None,
            **urls,
        )

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> DeniedEvaluation:
        """The evaluation a :meth:`to_json` document describes."""
        return cls(
            subject=dict(body["subject"]),
            resource=dict(body["resource"]),
            action=dict(body["action"]),
            denial=dict(body["denial"]),
            **{name: body.get(name) for name in cls._OPTIONAL},
        )


@dataclass(frozen=True)
class EarlierCall:
    """An identical earlier call (same requester, tool and arguments) whose approval request ended.

    A new request for the same call may be a duplicate: approving it runs the call again. The
    enforcement point finds the latest such call when it opens a request and carries it in the
    submission, so reviewers see it with the request (and the local backend seals it with the rest).

    Attributes:
        request_id: the earlier approval request (the backend's handle), as reviewers know it.
        task_id: the earlier call's task (the reference its requester was given).
        outcome: how it ended: its disposition (``approved-executed``, ``execution-error``,
            ``outcome-unknown``, ``denied-not-executed``).
        ran: whether the call was run (it may have had a side effect).
        ended_at_ms: when it ended (epoch ms).
    """

    request_id: str
    task_id: str
    outcome: str
    ran: bool
    ended_at_ms: int

    @property
    def text(self) -> str:
        """The warning reviewers read: ``Possible duplicate of <request>, executed at <time> (<outcome>).``"""
        ended = "executed" if self.ran else "ended without running"
        return f"Possible duplicate of {self.request_id}, {ended} at {iso8601(self.ended_at_ms)} ({self.outcome})."

    def to_json(self) -> dict[str, Any]:
        """The member of a submission body (times in epoch ms, as the body's other members)."""
        return {
            "request_id": self.request_id,
            "task_id": self.task_id,
            "outcome": self.outcome,
            "ran": self.ran,
            "ended_at_ms": self.ended_at_ms,
        }

    def for_reviewers(self) -> dict[str, Any]:
        """As the reviewer API shows it: :meth:`to_json` with ``ended_at`` in ISO 8601 and the :attr:`text`."""
        return {
            "request_id": self.request_id,
            "task_id": self.task_id,
            "outcome": self.outcome,
            "ran": self.ran,
            "ended_at": iso8601(self.ended_at_ms),
            "text": self.text,
        }

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> EarlierCall:
        """The earlier call a :meth:`to_json` document describes."""
        return cls(
            request_id=str(body["request_id"]),
            task_id=str(body["task_id"]),
            outcome=str(body["outcome"]),
            ran=bool(body["ran"]),
            ended_at_ms=int(body["ended_at_ms"]),
        )


@dataclass(frozen=True)
class ApprovalSubmission:
    """The exact body of one approval request.

    Two submissions are *equivalent* when their canonical JSON (RFC 8785) is identical; that is
    what an idempotent resubmission under the same key must match.

    Attributes:
        tool: the tool the call names.
        arguments: the call's arguments as reviewers may see them (the server redacts first).
        requester: the principal that made the call.
        template: the policy's approval template (who may approve, how many approvers).
        title: a short human-facing description from the policy.
        description: a longer human-facing description from the policy.
        deadline_ms: when the request stops accepting decisions (epoch ms), if the policy set one.
        reason: the policy's reason code for the denial.
        inputs: what the requester supplied for the template's submission inputs (e.g. a justification).
        evaluation: the denied evaluation and its raw denial members (ARAP backends submit them;
            others ignore them).
        duplicate_of: the latest identical earlier call whose request ended, if any (absent from
            the body when ``None``, so bodies without one keep their digest).
    """

    tool: str
    arguments: Mapping[str, Any]
    requester: str
    template: str | None = None
    title: str | None = None
    description: str | None = None
    deadline_ms: int | None = None
    reason: str | None = None
    inputs: Mapping[str, str] | None = None
    evaluation: DeniedEvaluation | None = None
    duplicate_of: EarlierCall | None = None

    def to_json(self) -> dict[str, Any]:
        """The body as a JSON object (absent members omitted)."""
        body: dict[str, Any] = {"tool": self.tool, "arguments": dict(self.arguments), "requester": self.requester}
        for name in ("template", "title", "description", "deadline_ms", "reason"):
            value = getattr(self, name)
            if value is not None:
                body[name] = value
        if self.inputs:
            body["inputs"] = dict(self.inputs)
        if self.evaluation is not None:
            body["evaluation"] = self.evaluation.to_json()
        if self.duplicate_of is not None:
            body["duplicate_of"] = self.duplicate_of.to_json()
        return body

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> ApprovalSubmission:
        """The submission a :meth:`to_json` document describes."""
        return cls(
            tool=str(body["tool"]),
            arguments=dict(body.get("arguments") or {}),
            requester=str(body["requester"]),
            template=body.get("template"),
            title=body.get("title"),
            description=body.get("description"),
            deadline_ms=body.get("deadline_ms"),
            reason=body.get("reason"),
            inputs=body.get("inputs"),
            evaluation=DeniedEvaluation.from_json(body["evaluation"]) if body.get("evaluation") else None,
            duplicate_of=EarlierCall.from_json(body["duplicate_of"]) if body.get("duplicate_of") else None,
        )

    @cached_property
    def canonical_body(self) -> bytes:
        """The body's RFC 8785 canonical JSON (computed once): what the digest covers."""
        return rfc8785.dumps(self.to_json())

    def digest(self) -> str:
        """SHA-256 hex digest of the canonical body: equal digests mean equivalent submissions."""
        return hashlib.sha256(self.canonical_body).hexdigest()

    def call_digest(self) -> str:
        """SHA-256 hex digest of the arguments' RFC 8785 canonical JSON: the call binding's digest.

        Audit events about the request carry it, so an auditor can tie a decision to the exact
        arguments without the events holding any argument value.
        """
        return self._call_digest

    @cached_property
    def _call_digest(self) -> str:
        return hashlib.sha256(rfc8785.dumps(dict(self.arguments))).hexdigest()

    def prepare(self) -> ApprovalSubmission:
        """Compute the canonical forms now, and return this submission (which keeps them).

        Canonicalizing large arguments takes a while: a caller on the event loop runs this on a
        worker thread first, so that a backend storing the request inside a database transaction
        (:class:`~mcp_approval.backends.capabilities.SupportsSubmitInTransaction`) only writes.
        """
        _ = self.canonical_body, self._call_digest
        return self


@dataclass(frozen=True)
class ApprovalState:
    """A backend's answer to "where does this request stand?".

    Attributes:
        status: the request's status.
        approval: on ``approved``, the approval material for re-evaluation (AuthZEN
            ``context.approval``: ``id``, ``approved_until``, ``approved_at``); never shown to
            MCP clients.
        approved_until_ms: on ``approved``, when the approval stops being usable (epoch ms).
        deadline_ms: while ``pending``, when the request expires unresolved (epoch ms), which
            the backend may move.
        retry_after_s: a hint for when to ask again.
        note: on ``denied``, words for the requester from whoever denied it (a reviewer's
            comment, when the template shares it), never their identity.
        integrity_failure: on ``failed``, why the backend's stored request could not be trusted
            (a row that no longer matches its seals): the call must not run on it.
    """

    status: ApprovalStatus
    approval: Mapping[str, Any] | None = None
    approved_until_ms: int | None = None
    deadline_ms: int | None = None
    retry_after_s: float | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    note: str | None = None
    integrity_failure: str | None = None


@dataclass(frozen=True)
class SealedRequest:
    """What a backend's seal vouches for about one request: what it was submitted as.

    Attributes:
        key: the submission key it was opened under.
        tool: the tool the call names.
        requester: the principal that made the call.
        call_digest: :meth:`ApprovalSubmission.call_digest` of the submitted body.
    """

    key: str
    tool: str
    requester: str
    call_digest: str


class ApprovalBackendError(MCPApprovalError):
    """The backend could not be reached or answered unusably; the operation may be retried."""


class IdempotencyConflictError(ApprovalBackendError):
    """A submission key was reused with a body that is not equivalent to the first one."""

    def __init__(self, key_hint: str) -> None:
        super().__init__(f"submission key {key_hint}… was already used with a different request body")


class UnknownRequestError(ApprovalBackendError):
    """The backend has no request under this handle."""


class SubmissionRejectedError(ApprovalBackendError):
    """The backend refused the submission for good (e.g. an expired or unverifiable denial).

    Resubmitting the same body under the same key cannot succeed; the caller ends the workflow
    instead of retrying.
    """


class RequestIntegrityError(MCPApprovalError):
    """A backend's stored request does not match its seals: nothing may run on it.

    Not an :class:`ApprovalBackendError`: asking again cannot help.
    """


StatusListener = Callable[[str], Awaitable[None]]
"""Called with a request's handle when the backend learns it changed: a wake-up, never a verdict."""


class ApprovalBackend(Protocol):
    """The abstract approval backend SEP-2848 references.

    Attributes:
        name: a short stable name stored with each workflow (``"local"``, ``"arap"``).
        supports_cancel: whether :meth:`cancel` reaches the backend.
    """

    name: str
    supports_cancel: bool

    async def start(self, listener: StatusListener | None = None) -> None:
        """Connect; ``listener`` is woken with a handle when a request may have changed."""
        ...

    async def stop(self) -> None:
        """Release resources."""
        ...

    async def submit(self, key: str, submission: ApprovalSubmission) -> str:
        """Open a request under ``key`` and return its durable handle.

        The same key with an equivalent submission returns the same handle (a retry after a
        crash recovers the first request instead of opening a second).

        Raises:
            IdempotencyConflictError: the key was used with a different body.
            ApprovalBackendError: the backend is unreachable.
        """
        ...

    async def find(self, key: str) -> str | None:
        """The handle of the request submitted under ``key``, if there is one."""
        ...

    async def status(self, handle: str) -> ApprovalState:
        """The request's authoritative state.

        Raises:
            UnknownRequestError: no such request.
            ApprovalBackendError: the backend is unreachable.
        """
        ...

    async def cancel(self, handle: str) -> None:
        """Withdraw a pending request (a no-op once it is terminal, or without :attr:`supports_cancel`)."""
        ...
