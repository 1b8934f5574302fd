"""Submissions after the first: chained requests, and intents a crash left in flight.

A chained request (the PDP asked for a new approval round) and the recovery of an interrupted
submission both send an intent's exact sealed body under its own idempotency key, so a backend
that already holds the request answers with the same handle instead of creating a second one.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from mcp_approval.approval.messages import BACKEND_FAILED
from mcp_approval.approval.persistence.states import UNSETTLED_INTENTS, IntentState, Phase
from mcp_approval.approval.persistence.store import DriverStore, Intent, Reschedule, TaskOutcome
from mcp_approval.backends import (
    ApprovalBackend,
    ApprovalBackendError,
    ApprovalSubmission,
    SubmissionRejectedError,
    SupportsFindSubmitted,
)
from mcp_approval.clock import Clock
from mcp_approval.keyring import BindingCipher
from mcp_approval.protocol import INTERNAL_ERROR
from mcp_approval.tasks.models import error_document
from mcp_approval.tasks.states import TaskStatus
from mcp_approval.tracing import span

__all__ = ["Resubmission", "withdraw"]

logger = logging.getLogger("mcp_approval.approval")


async def withdraw(backend: ApprovalBackend, handle: str, *, task_id: str) -> bool:
    """Cancel a request at the backend, where it can be cancelled; ``False`` (logged) if the backend failed.

    The local fence alone keeps the tool from running, so a backend without cancel (or one that
    is down) leaves a request that a late approval cannot act on.
    """
    if not backend.supports_cancel:
        return True
    try:
        with span("backend.cancel", backend=backend.name, task_id=task_id):
            await backend.cancel(handle)
    except ApprovalBackendError as exc:
        logger.warning("could not withdraw approval request: %s", exc)
        return False
    return True


class Resubmission:
    """Sends chained intents and settles the intents a crash left in flight, for one worker.

    Args:
        store: the approval store's part for the driver (chains, endings, recovery).
        backend: where the requests go.
        cipher: opens the sealed submission bodies.
        clock: the source of time.
        intent_grace_ms: an intent its writer has not vouched for this long (its creation neither
            moved it on nor renewed it) is an orphan of a crash.

    The worker's own creations in flight (:meth:`creating`) are never its orphans, however slow:
    only its creation can fail them. Another worker's are, once that worker stopped renewing them
    (:meth:`renew_creating`) for the grace: it died, or stalled that long. A creation of this worker
    that failed (the store or the backend went away under it) is settled by this worker at once
    (:meth:`settle_failed`), without waiting for the grace: until it is, the call's retry would find
    it still in flight and could only be told to try again.
    """

    def __init__(
        self,
        store: DriverStore,
        backend: ApprovalBackend,
        cipher: BindingCipher,
        clock: Clock,
        *,
        intent_grace_ms: int,
    ) -> None:
        self.store = store
        self.backend = backend
        self.cipher = cipher
        self.clock = clock
        self.intent_grace_ms = intent_grace_ms
        # Where the next page of the orphan purge starts (it walks the workflows page by page).
        self._purge_after = ""
        # The intent keys of this worker's creations between recording the intent and the task.
        self._creating: set[str] = set()
        # This worker's creations that failed and are not settled yet: (task id, generation) by key.
        self._failed: dict[str, tuple[str, int]] = {}

    @contextlib.contextmanager
    def creating(self, intent: Intent) -> Iterator[None]:
        """Mark ``intent`` as this worker's creation in flight while the block runs; one the block
        leaves with an exception is settled by :meth:`settle_failed` (it is a no-op on an intent
        the creation bound to its task, or never recorded)."""
        self._creating.add(intent.key)
        try:
            yield
        except BaseException:
            self._failed[intent.key] = (intent.task_id, intent.generation)
            raise
        finally:
            self._creating.discard(intent.key)

    @property
    def failed_creations(self) -> bool:
        """Whether a creation of this worker failed and is not settled yet."""
        return bool(self._failed)

    async def settle_failed(self) -> None:
        """Settle this worker's failed creations now: withdrawn at the backend and abandoned.

        One the store or the backend cannot settle yet stays for the next call (each driver pass,
        and each new creation, makes one).
        """
        for key, (task_id, generation) in list(self._failed.items()):
            intent = await self.store.intent(task_id, generation)
            if intent is not None and intent.key == key and intent.state in UNSETTLED_INTENTS:
                await self._reconcile_intent(intent)
                intent = await self.store.intent(task_id, generation)
            if intent is None or intent.key != key or intent.state not in UNSETTLED_INTENTS:
                self._failed.pop(key, None)  # settled (here, or by a concurrent call)

    async def renew_creating(self) -> None:
        """Vouch for this worker's creations in flight, so no other worker takes them for orphans."""
        if self._creating:
            await self.store.renew_intents(sorted(self._creating))

    async def submit_chained(self, intent: Intent, deadline: int | None) -> None:
        """Submit a chained intent, bind its handle and schedule the task's next check.

        A backend that refuses the request for good fails the task (before any claim); one that
        cannot be reached leaves the intent for reconciliation to retry under the same key.
        """
        body = self.cipher.open(intent.body_sealed, record=intent.key)
        try:
            with span("backend.submit", root=True, backend=self.backend.name, task_id=intent.task_id):
                handle = await self.backend.submit(intent.key, ApprovalSubmission.from_json(body))
        except SubmissionRejectedError as exc:
            logger.warning("task %s: chained submission refused (%s)", intent.task_id[:8], exc)
            outcome = TaskOutcome(
                TaskStatus.FAILED, BACKEND_FAILED, error=error_document(INTERNAL_ERROR, BACKEND_FAILED)
            )
            await self.store.fence(intent.task_id, outcome, generation=intent.generation)
            return
        except ApprovalBackendError as exc:
            logger.warning("task %s: chained submission failed; reconciliation retries (%s)", intent.task_id[:8], exc)
            return
        await self.store.bind_chained(intent.key, intent.task_id, intent.generation, handle)
        await self.store.reschedule(
            Reschedule(
                intent.task_id,
                intent.generation,
                self.clock.now_ms(),
                attempts=0,
                request_deadline=deadline,
                min_ttl_end=None if deadline is None else deadline + self.store.result_retention_ms,
            )
        )

    async def resume(self, intent: Intent) -> None:
        """Recover an intent whose submission a crash interrupted (same key, same body)."""
        body = self.cipher.open(intent.body_sealed, record=intent.key)
        await self.submit_chained(intent, ApprovalSubmission.from_json(body).deadline_ms)

    async def reconcile(self) -> None:
        """Settle intents a crash left in flight, and purge one page of records whose task retention ended.

        An initial intent with no task is withdrawn at the backend (found under its key) and
        abandoned: its caller never got a task id, and a retry is a fresh call. An intent the
        task is waiting for (a chained request, or the first submission of a task that collected
        its inputs) is resubmitted under the same key, which recovers the request.
        """
        cutoff = self.clock.now_ms() - self.intent_grace_ms
        for intent in await self.store.stale_intents(cutoff):
            if intent.key not in self._creating:  # a creation of this worker, merely slow: its own to settle
                await self._reconcile_intent(intent)
        self._purge_after = await self.store.purge_orphans(self._purge_after) or ""

    async def _find(self, intent: Intent) -> str | None:
        """The handle of an intent's request: by key, or by resubmitting its exact body (ARAP)."""
        backend = self.backend
        if isinstance(backend, SupportsFindSubmitted):
            body = self.cipher.open(intent.body_sealed, record=intent.key)
            return await backend.find_submitted(intent.key, ApprovalSubmission.from_json(body))
        return await backend.find(intent.key)

    async def _reconcile_intent(self, intent: Intent) -> None:
        if intent.state is not IntentState.WITHDRAWING:
            workflow = await self.store.get(intent.task_id)
            current = (
                workflow is not None and workflow.phase is Phase.PENDING and workflow.generation == intent.generation
            )
            if current:  # the task exists and waits for this very submission: recover it
                await self.resume(intent)
                return
            # Claim the orphan before touching the backend: a creation that bound the intent since
            # the read above wins the compare-and-set, and then nothing is withdrawn.
            if not await self.store.claim_orphan(intent):
                return
        if await self._withdraw_request(intent) and await self.store.abandon_intent(intent):
            logger.info("reconciliation: withdrew an orphaned approval submission (task never created)")

    async def _withdraw_request(self, intent: Intent) -> bool:
        """Cancel an orphan's backend request; ``False`` when the backend cannot be reached (retried later)."""
        try:
            # A handle missing from the intent as read may have been recorded since: look it up by key.
            handle = intent.handle or await self._find(intent)
        except ApprovalBackendError as exc:
            logger.warning("reconciliation: backend unreachable for an orphaned intent; retried later (%s)", exc)
            return False
        return handle is None or await withdraw(self.backend, handle, task_id=intent.task_id)
