"""What a backend may offer beyond the contract, as Protocols the server asks for by name.

The server never asks which class a backend is: it asks whether the backend has a capability
(``isinstance(backend, SupportsStatusMany)``) and uses it if so. The workflow driver batches
status reads (:class:`SupportsStatusMany`), follows a change feed (:class:`SupportsChangeFeed`),
finds a submission again (:class:`SupportsFindSubmitted`) and checks sealed requests
(:class:`SupportsSealedRequests`); creation joins the backend's transaction
(:class:`SupportsSubmitInTransaction`). A server composing a backend migrates its tables
(:class:`SupportsTables`), seals it under the binding key (:class:`SupportsSealing`), checks its
policy's templates and routes notifications by them (:class:`SupportsTemplates`), and mounts the
reviewer API, the console and notifications over the requests it keeps (:class:`SupportsReview`),
with similar-call rules and delegations where the backend keeps them (:class:`SupportsSimilarRules`,
:class:`SupportsDelegations`).
:class:`~mcp_approval.backends.LocalApprovalBackend` has them all; an ARAP backend a few.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from mcp_approval.backends.contract import ApprovalBackend, ApprovalState, ApprovalSubmission, SealedRequest

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from mcp_approval.backends.local.delegation_rows import Delegation
    from mcp_approval.backends.local.records import ApprovalRecord, RequestPage
    from mcp_approval.backends.local.rules import ApprovalTemplate
    from mcp_approval.backends.local.seals import RequestSeal
    from mcp_approval.backends.local.similar_rows import RuleDecision, SimilarCallRule
    from mcp_approval.backends.local.similar_store import SimilarRuleSpec
    from mcp_approval.backends.local.step_up import StepUp
    from mcp_approval.storage.migrations import Migrations

__all__ = [
    "SupportsChangeFeed",
    "SupportsDelegations",
    "SupportsFindSubmitted",
    "SupportsReview",
    "SupportsSealedRequests",
    "SupportsSealing",
    "SupportsSimilarRules",
    "SupportsStatusMany",
    "SupportsSubmitInTransaction",
    "SupportsTables",
    "SupportsTemplates",
]


@runtime_checkable
class SupportsFindSubmitted(Protocol):
    """Optional: a backend that can only find a request by resubmitting its exact body under its key.

    An idempotent resubmission answers with the request the first submission opened (or opens
    it, if the first never arrived, so it can be withdrawn).
    """

    async def find_submitted(self, key: str, submission: ApprovalSubmission) -> str | None:
        """The handle of the request submitted under ``key`` with ``submission``, if it can be had."""
        ...


@runtime_checkable
class SupportsStatusMany(Protocol):
    """Optional: a backend that reads many requests' states at once (the workflow driver's batch pass)."""

    async def status_many(self, handles: Sequence[str]) -> dict[str, ApprovalState]:
        """``status`` of each known handle; unknown handles are left out of the answer."""
        ...


@runtime_checkable
class SupportsChangeFeed(Protocol):
    """Optional: a backend that lists the requests whose status changed since a time.

    The workflow driver follows it every pass, so a decision made by any writer of the backend (another
    worker, the review CLI) is seen within a pass without polling each pending request.
    """

    async def changed_since(self, since_ms: int) -> list[tuple[str, int]]:
        """``(handle, changed at)`` of every request that left ``pending`` at or after ``since_ms``."""
        ...


@runtime_checkable
class SupportsSubmitInTransaction(Protocol):
    """Optional: a backend kept in the server's own database, whose submission can join a transaction.

    The crash-consistent creation of SEP-2848 (a durable intent, then the submission, then the
    handle, then the task, each committed before the next) exists because the backend is on the
    other side of a network. A backend that writes to the same database instead takes part in one
    transaction with the intent and the task: creation then commits whole or not at all, and a
    crash leaves no intent in flight and no request without its task.
    """

    def shares_database(self, database: object) -> bool:
        """Whether this backend writes to ``database`` (the very object the approval store uses)."""
        ...

    def submit_in(self, conn: Connection, key: str, submission: ApprovalSubmission) -> str:
        """Open a request under ``key`` inside the caller's write transaction ``conn``; its handle.

        Raises:
            SubmissionRejectedError: the request cannot be accepted (it wrote nothing).
        """
        ...

    def submitted(self, handle: str, submission: ApprovalSubmission) -> None:
        """The transaction that opened ``handle`` for ``submission`` committed: start what follows it."""
        ...


@runtime_checkable
class SupportsSealedRequests(Protocol):
    """Optional: a backend that seals what it stores, so the workflow driver can check what it follows.

    Before an approved call is claimed, the driver compares the request's sealed content with the
    task's own sealed call binding: a task pointed at another request (its handle swapped in the
    database) is then an integrity failure, not the other request's approval running this call.
    """

    async def sealed_request(self, handle: str) -> SealedRequest | None:
        """What the request was submitted as, checked against its seals (``None``: this backend seals nothing).

        Raises:
            RequestIntegrityError: the stored request does not match its seals.
            UnknownRequestError: no such request.
        """
        ...


@runtime_checkable
class SupportsTables(Protocol):
    """Optional: a backend that keeps tables in the server's own database.

    The server migrates their history with its own tables before it starts the backend.
    """

    @property
    def migrations(self) -> tuple[Migrations, ...]:
        """The histories of the tables this backend keeps (see :func:`mcp_approval.storage.migrate`)."""
        ...


@runtime_checkable
class SupportsSealing(Protocol):
    """Optional: a backend that seals what reviewers see of each request under a key it is given.

    A server gives one built without a key its call-binding key, so an edited request row cannot
    be approved.
    """

    def sealed_with(self, seal: RequestSeal) -> ApprovalBackend:
        """This backend if it already seals, else one like it that seals with ``seal``."""
        ...


@runtime_checkable
class SupportsTemplates(Protocol):
    """Optional: a backend whose approval templates are configured here (not at a remote service).

    The server checks that every template its policy names is one of them, and routes
    notifications by each template's ``notify``.
    """

    @property
    def templates(self) -> Mapping[str, ApprovalTemplate]:
        """The configured templates, by name."""
        ...


@runtime_checkable
class SupportsReview(Protocol):
    """Optional: a backend whose requests this server's reviewers list, read and decide.

    The reviewer API, the console, ``mcp-approval review`` and notifications are built on it.
    """

    async def page_requests(
        self,
        status: Literal["pending", "decided"] = "pending",
        *,
        viewer: str | None = None,
        offset: int = 0,
        limit: int = 200,
    ) -> RequestPage:
        """One page of pending requests (oldest first) or decided ones (latest first), with the
        total; with a ``viewer``, only those it may see."""
        ...

    async def get_request(self, request_id: str, *, viewer: str | None = None) -> ApprovalRecord | None:
        """One request as ``viewer`` may see it (without a viewer, as it is), or ``None``."""
        ...

    def sees_reviewers(self, principal: str, record: ApprovalRecord) -> bool:
        """Whether ``principal`` sees who decided ``record``."""
        ...

    def why_ineligible(self, reviewer: str, record: ApprovalRecord) -> str | None:
        """Why ``reviewer`` may not decide ``record``, or ``None``."""
        ...

    async def decide(
        self,
        request_id: str,
        reviewer: str,
        decision: Literal["approve", "deny"],
        comment: str | None = None,
        *,
        step_up: StepUp | None = None,
    ) -> ApprovalRecord:
        """Record ``reviewer``'s decision and return the request as it now stands (``step_up``: the
        verified second factor a template with ``step_up`` requires).

        Raises:
            ReviewError: the decision was refused (not eligible, already decided, expired, …).
            UnknownRequestError: no such request.
        """
        ...


@runtime_checkable
class SupportsSimilarRules(Protocol):
    """Optional: reviewers may approve "this, and calls like it" (similar-call rules), list and revoke them."""

    async def approve_similar(
        self, request_id: str, reviewer: str, spec: SimilarRuleSpec, comment: str | None = None
    ) -> tuple[ApprovalRecord, SimilarCallRule]:
        """Approve the request and write the rule ``spec`` asks for, in one transaction.

        Raises:
            ReviewError: refused (the rule's own refusals are ``SimilarRuleError``).
            UnknownRequestError: no such request.
        """
        ...

    async def revoke_similar_rule(self, rule_id: str, principal: str) -> SimilarCallRule:
        """Revoke a rule at once.

        Raises:
            ReviewError: no such rule, already revoked, or ``principal`` may not revoke it.
        """
        ...

    async def similar_rules(self, *, viewer: str | None = None, active_only: bool = False) -> list[SimilarCallRule]:
        """The rules ``viewer`` may see, newest first."""
        ...

    async def similar_rule(self, rule_id: str, *, viewer: str | None = None) -> SimilarCallRule | None:
        """One rule as ``viewer`` may see it, or ``None``."""
        ...

    def similar_rule_limits(self, record: ApprovalRecord) -> tuple[float, int] | None:
        """The longest (seconds) and most uses a rule written approving ``record`` may have; ``None``: no rule."""
        ...

    async def similar_rule_decisions(self, rule_id: str, *, viewer: str | None = None) -> list[RuleDecision] | None:
        """The calls a rule decided, newest first; ``None`` when ``viewer`` may not see the rule."""
        ...


@runtime_checkable
class SupportsDelegations(Protocol):
    """Optional: a reviewer may hand their role for a template to another reviewer for a period."""

    async def delegate(self, delegator: str, delegate: str, template: str, duration_s: float) -> Delegation:
        """Hand ``delegator``'s role for ``template`` to ``delegate`` from now for ``duration_s`` seconds.

        Raises:
            ReviewError: refused (the delegation's own refusals are ``DelegationError``).
        """
        ...

    async def revoke_delegation(self, delegation_id: str, principal: str) -> Delegation:
        """Revoke a delegation at once.

        Raises:
            ReviewError: no such delegation, already revoked, or ``principal`` is not its delegator.
        """
        ...

    async def delegations(self, *, viewer: str | None = None, active_only: bool = False) -> list[Delegation]:
        """The delegations ``viewer`` made or received, newest first."""
        ...

    async def delegation(self, delegation_id: str, *, viewer: str | None = None) -> Delegation | None:
        """One delegation as ``viewer`` may see it, or ``None``."""
        ...
