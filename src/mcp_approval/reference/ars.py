"""The reference ARAP Access Request Service, built on the local approval backend.

ARAP-specific state (task handles, caller-scoped Idempotency-Keys, ``jti`` values, issued
approvals, callbacks) lives in :class:`~mcp_approval.reference.ars_store.ArapStore`. The human
workflow (who may decide, N-of-M, decisions, expiry, audit) is the
:class:`~mcp_approval.backends.LocalApprovalBackend`'s: every task is one of its requests,
so reviewers use the same reviewer API, ``mcp-approval review`` CLI and console.

Submission order (ARAP §2.3, §2.10; the wire contract): authenticate, parse, look up (caller,
Idempotency-Key) first (an equivalent body answers the stored task before any token check, a
different one is ``duplicate_request``), then the denial binding, then the backend request
(idempotent under a key derived from caller, Idempotency-Key and body digest, so a retry after a
crash finds it), then the task row and the token's ``jti`` in one transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError

from mcp_approval.backends import LocalApprovalBackend
from mcp_approval.backends.contract import (
    ApprovalState,
    ApprovalStatus,
    ApprovalSubmission,
    IdempotencyConflictError,
    SubmissionRejectedError,
)
from mcp_approval.clock import Clock, iso8601, parse_iso8601
from mcp_approval.protocol import (
    ARAP_DUPLICATE_REQUEST,
    ARAP_INVALID_DENIAL_BINDING,
    ARAP_INVALID_TASK_STATE,
    ARAP_MODE_REEVALUATE,
    ARAP_TASK_EXPIRED,
    ARAP_UNKNOWN_TASK,
)
from mcp_approval.reference.arap_callbacks import callback_problem
from mcp_approval.reference.ars_outbox import CallbackOutbox
from mcp_approval.reference.ars_store import ArapStore, ArsApprovalRecord, ArsTaskRecord
from mcp_approval.reference.ars_submission import ArapError, BoundDenial, DenialChecker, Submission
from mcp_approval.reference.config import ArapServerSection
from mcp_approval.reference.signing import KeySet
from mcp_approval.storage.audit import AuditLog
from mcp_approval.storage.worker_guards import EventWindow, MemoryEventWindow

__all__ = ["AccessRequestService", "ArsAnswer"]


@dataclass(frozen=True)
class ArsAnswer:
    """An HTTP answer of the service: status code, JSON body, extra headers."""

    status: int
    body: dict[str, Any]
    headers: Mapping[str, str]


class AccessRequestService:
    """Submission, status and cancellation of Access Requests (see the module docstring).

    Args:
        backend: the local approval backend carrying the human workflow.
        store: the ARAP tables.
        checker: verifies denial bindings.
        keys: signs ``approval.state``.
        pdp_id: the PDP identifier (the state's ``aud``).
        endpoint: the Access Request endpoint (the state's ``iss``, and the base of task URLs).
        settings: the ``[arap]`` section.
        resolved_templates: templates an automatic resolver decides (a submission waits for it).
        callbacks: delivers the callbacks owed (``arap_callbacks``); ``None`` refuses submissions
            that ask for one.
        audit: where ARAP events go (task created, approval issued, submission refused).
        clock: the source of time.
        submission_events: where submissions per client are counted (by default in memory).
    """

    def __init__(
        self,
        *,
        backend: LocalApprovalBackend,
        store: ArapStore,
        checker: DenialChecker,
        keys: KeySet,
        pdp_id: str,
        endpoint: str,
        settings: ArapServerSection,
        resolved_templates: frozenset[str],
        callbacks: CallbackOutbox | None,
        audit: AuditLog,
        clock: Clock,
        submission_events: EventWindow | None = None,
    ) -> None:
        self.backend = backend
        self.store = store
        self._checker = checker
        self._keys = keys
        self._pdp_id = pdp_id
        self.endpoint = endpoint
        self._settings = settings
        self._resolved = resolved_templates
        self.callbacks = callbacks
        self._audit = audit
        self._clock = clock
        self._waiters: dict[str, asyncio.Event] = {}
        self._submissions: EventWindow = submission_events or MemoryEventWindow()
        #: Completed background sweeps (see :meth:`sweep_once`).
        self.sweeps = 0
        self._resource_types = {c.id: frozenset(c.resource_types) for c in settings.clients if c.resource_types}

    # -- submission -------------------------------------------------------------------------------

    async def submit(self, caller: str, key: str | None, submission: Submission) -> ArsAnswer:
        """Open (or, for an idempotent retry, find) the task for ``submission``."""
        self._authorize(caller, submission)
        digest = hashlib.sha256(submission.digest_input).hexdigest()
        if key is not None and (existing := await self.store.task_by_key(caller, key)) is not None:
            return await self._replayed(existing, digest)
        await self._count_submission(caller)
        callback = submission.body.get("callback")
        self._check_callback(callback)
        try:
            bound = await self._checker.check(submission)
        except ArapError as exc:
            if key is not None and (existing := await self.store.task_by_key(caller, key)) is not None:
                # An identical retry that looked for its key while the first submission was being
                # stored finds the binding token used by it: the same submission, answered as one.
                return await self._replayed(existing, digest)
            data = {"code": exc.code, "detail": exc.detail}
            await self._audit.record("arap.submission_refused", actor=caller, data=data)
            raise
        now = self._clock.now_ms()
        scoped = hashlib.sha256(f"{caller}\n{key or secrets.token_hex(32)}\n{digest}".encode()).hexdigest()
        approval_submission = self._approval_submission(submission, bound, now)
        request_id = await self._backend_request(scoped, approval_submission)
        row = await self.backend.get_request(request_id)
        expires_at = row.expires_at if row is not None and row.expires_at is not None else now
        task = ArsTaskRecord(
            task_id="arq_" + secrets.token_urlsafe(24),
            caller=caller,
            idempotency_key=key,
            body_digest=digest,
            request_id=request_id,
            binding_hash=bound.binding_hash,
            members=bound.members,
            evaluation_id=bound.evaluation_id,
            callback_endpoint=callback["endpoint"] if isinstance(callback, dict) else None,
            callback_state=_callback_state(callback),
            created_at=now,
            expires_at=expires_at,
            retain_until=expires_at + int(self._settings.retention_s * 1000),
        )
        try:
            await self.store.insert_task(task, bound.jti, now)
        except IntegrityError:
            return await self._lost_race(caller, key, digest, request_id)
        data = {
            "task_id": task.task_id,
            "evaluation_id": task.evaluation_id,
            "call_digest": approval_submission.call_digest(),
        }
        await self._audit.record("arap.task_created", subject=request_id, actor=caller, data=data)
        if row is not None and row.template in self._resolved:
            await self._wait_for_resolver(request_id)
        return await self._task_answer(task, created=True)

    def _authorize(self, caller: str, submission: Submission) -> None:
        allowed = self._resource_types.get(caller)
        if allowed is not None and submission.resource["type"] not in allowed:
            raise ArapError(None, "this client may not request access to this resource type", status=403)

    async def _count_submission(self, caller: str) -> None:
        """A sliding one-minute window per client, in ``submission_events`` (the store's table for
        ``arap-server``, so every worker counts against one limit)."""
        now = self._clock.now_ms()
        key, limit = f"ars-submit:{caller}", self._settings.submissions_per_minute
        recent = await self._submissions.recent(key, now - 60_000, limit)
        if len(recent) >= limit:
            retry = max(1, (recent[0] + 60_000 - now + 999) // 1000)
            raise ArapError(None, "too many submissions; retry later", status=429, headers={"Retry-After": str(retry)})
        await self._submissions.add(key, now, forget_before_ms=now - 60_000)

    async def _replayed(self, task: ArsTaskRecord, digest: str) -> ArsAnswer:
        if task.body_digest != digest:
            raise ArapError(ARAP_DUPLICATE_REQUEST, "this Idempotency-Key was used with a different request body")
        return await self._task_answer(task, created=True)

    async def _lost_race(self, caller: str, key: str | None, digest: str, request_id: str) -> ArsAnswer:
        existing = await self.store.task_by_key(caller, key) if key is not None else None
        if existing is not None and existing.request_id == request_id:
            return await self._replayed(existing, digest)
        await self.backend.cancel(request_id)  # the orphan of a refused submission
        if existing is not None:
            return await self._replayed(existing, digest)
        raise ArapError(ARAP_INVALID_DENIAL_BINDING, "binding_token was already used (jti replay)")

    async def _backend_request(self, key: str, submission: ApprovalSubmission) -> str:
        found = await self.backend.find(key)
        if found is not None:
            return found
        try:
            return await self.backend.submit(key, submission)
        except SubmissionRejectedError as exc:  # e.g. a template this service does not configure
            raise ArapError(None, f"the request cannot be opened: {exc}", status=422) from exc
        except IdempotencyConflictError:
            # A concurrent identical submission won; its deadline differs by milliseconds.
            found = await self.backend.find(key)
            if found is None:
                raise
            return found

    def _approval_submission(self, submission: Submission, bound: BoundDenial, now: int) -> ApprovalSubmission:
        arguments = (submission.context or {}).get("arguments")
        resource = submission.resource
        tool = resource["id"] if resource["type"] == "tool" else f"{submission.action['name']} {resource['id']}"
        display = bound.display or {}
        return ApprovalSubmission(
            tool=tool,
            arguments=arguments if isinstance(arguments, dict) else {},
            requester=submission.subject["id"],
            template=bound.template,
            title=display.get("title") if isinstance(display.get("title"), str) else None,
            description=display.get("description") if isinstance(display.get("description"), str) else None,
            deadline_ms=now + int(self._settings.task_lifetime_s * 1000),
            reason=submission.denial.get("reason") if isinstance(submission.denial.get("reason"), str) else None,
        )

    def _check_callback(self, callback: Any) -> None:
        if callback is None:
            return
        if not isinstance(callback, dict):
            raise ArapError(None, "callback must be an object")
        if self.callbacks is None:
            raise ArapError(None, "this service sends no callbacks (no callback secret is configured)")
        problem = callback_problem(
            callback.get("endpoint"), self._settings.callback_allowlist, dev_mode=self._settings.dev_mode
        )
        if problem is not None:
            raise ArapError(None, problem)

    async def _wait_for_resolver(self, request_id: str) -> None:
        event = self._waiters.setdefault(request_id, asyncio.Event())
        try:
            if (await self.backend.status(request_id)).status is ApprovalStatus.PENDING:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), self._settings.sync_wait_s)
        finally:
            self._waiters.pop(request_id, None)

    # -- status and cancel ------------------------------------------------------------------------

    async def status(self, caller: str, task_id: str) -> ArsAnswer:
        """The task's current state (``Retry-After`` while pending, ``result`` once approved)."""
        return await self._task_answer(await self._visible(caller, task_id), created=False)

    async def cancel(self, caller: str, task_id: str) -> ArsAnswer:
        """Cancel a pending task; a terminal one is ``invalid_task_state``."""
        task = await self._visible(caller, task_id)
        state = await self.backend.status(task.request_id)
        if state.status is ApprovalStatus.PENDING:
            await self.backend.cancel(task.request_id)  # owes the callback in the same transaction
            self._wake_callbacks()
            state = await self.backend.status(task.request_id)
            if state.status is ApprovalStatus.CANCELLED:
                return ArsAnswer(200, {"task": self._task_json(task, state)}, {})
        # Already terminal (a second cancel included), or a decision won the race.
        raise ArapError(ARAP_INVALID_TASK_STATE, f"the task is already {state.status.value}")

    async def _visible(self, caller: str, task_id: str) -> ArsTaskRecord:
        task = await self.store.task(task_id)
        if task is None or task.caller != caller:
            # Another client's task is indistinguishable from an unknown one.
            raise ArapError(ARAP_UNKNOWN_TASK, "unknown task")
        if self._clock.now_ms() >= task.retain_until:
            raise ArapError(ARAP_TASK_EXPIRED, "the task handle has expired")
        return task

    async def _task_answer(self, task: ArsTaskRecord, *, created: bool) -> ArsAnswer:
        state = await self.backend.status(task.request_id)
        body: dict[str, Any] = {"task": self._task_json(task, state)}
        headers: dict[str, str] = {}
        if state.status is ApprovalStatus.PENDING:
            headers["Retry-After"] = str(self._settings.retry_after_s)
        if state.status is ApprovalStatus.APPROVED:
            approval = await self._issued(task, state)
            body["result"] = {"mode": ARAP_MODE_REEVALUATE, "approval": _approval_json(approval)}
        if created:
            headers["Location"] = body["task"]["status_endpoint"]
            return ArsAnswer(202 if state.status is ApprovalStatus.PENDING else 201, body, headers)
        return ArsAnswer(200, body, headers)

    def _task_json(self, task: ArsTaskRecord, state: ApprovalState) -> dict[str, Any]:
        url = f"{self.endpoint}/{task.task_id}"
        body: dict[str, Any] = {"id": task.task_id, "status": state.status.value, "status_endpoint": url}
        body["expires_at"] = iso8601(task.expires_at)
        if not state.status.terminal:
            body["links"] = {"cancel": url + "/cancel"}
        return body

    async def _issued(self, task: ArsTaskRecord, state: ApprovalState) -> ArsApprovalRecord:
        existing = await self.store.approval_for_task(task.task_id)
        if existing is not None:
            return existing
        approved = state.approval or {}
        # Whole seconds, so that the state's exp equals approved_until exactly.
        until = (state.approved_until_ms or self._clock.now_ms()) // 1000 * 1000
        approved_at = parse_iso8601(str(approved.get("approved_at"))) or self._clock.now_ms()
        approval_id = "apr_" + secrets.token_urlsafe(32)
        claims = {
            "iss": self.endpoint,
            "aud": self._pdp_id,
            "iat": self._clock.now_ms() // 1000,
            "exp": until // 1000,
            "approval_id": approval_id,
            "binding_hash": task.binding_hash,
            "binding_context_members": task.members,
        }
        record = ArsApprovalRecord(
            approval_id,
            task.task_id,
            task.binding_hash,
            task.members,
            approved_at,
            until,
            self._keys.sign(claims),
            None,
        )
        stored = await self.store.insert_approval(record)
        if stored.approval_id == approval_id:
            data = {"task_id": task.task_id, "approval_id": approval_id, "approved_until": iso8601(until)}
            await self._audit.record("arap.approval_issued", subject=task.request_id, data=data)
        return stored

    # -- background sweep ---------------------------------------------------------------------------

    async def sweep_once(self) -> None:
        """One pass of the background sweep: expire tasks past their deadline (which owes their
        callbacks), free Idempotency-Keys whose window closed, drop settled callbacks past retention."""
        await self.backend.expire_due()
        self._wake_callbacks()
        now = self._clock.now_ms()
        await self.store.purge(now)
        if self.callbacks is not None:
            await self.callbacks.purge(now - int(self._settings.retention_s * 1000))
        self.sweeps += 1

    def _wake_callbacks(self) -> None:
        if self.callbacks is not None:
            self.callbacks.wake()

    # -- backend notifications --------------------------------------------------------------------

    async def on_backend_change(self, request_id: str) -> None:
        """A request was decided: issue its approval, wake a waiting submission and the callback outbox.

        The approval is issued here, when the decision commits, so that it exists (and can be
        revoked) from then on; a status read issues it too if this step was lost to a crash. The
        callback was already owed by the decision's own transaction (:func:`.ars_outbox.queue_callback`).
        """
        self._wake_callbacks()
        event = self._waiters.get(request_id)
        if event is not None:
            event.set()
        task = await self.store.task_by_request(request_id)
        if task is None:
            return  # submitted and resolved at once: the submission answers (and issues) itself
        state = await self.backend.status(request_id)
        if state.status is ApprovalStatus.APPROVED:
            await self._issued(task, state)


def _callback_state(callback: Any) -> str | None:
    if isinstance(callback, dict) and isinstance(callback.get("state"), str):
        return str(callback["state"])
    return None


def _approval_json(record: ArsApprovalRecord) -> dict[str, Any]:
    return {
        "id": record.approval_id,
        "approved_at": iso8601(record.approved_at),
        "approved_until": iso8601(record.approved_until),
        "state": record.state,
    }
