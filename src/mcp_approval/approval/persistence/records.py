"""The rows of the approval workflow tables, as values (see :mod:`mcp_approval.approval.persistence.store`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from mcp_approval.approval.persistence.states import IntentState, Phase
from mcp_approval.tasks.models import TaskRecord
from mcp_approval.tasks.states import TaskStatus

__all__ = [
    "APPROVAL_HANDLER",
    "Admission",
    "Intent",
    "NewWorkflow",
    "Reschedule",
    "TaskOutcome",
    "Workflow",
    "call_scope",
    "dumps",
    "intent_from_row",
    "intent_row",
    "workflow_from_row",
    "workflow_row",
]

#: The handler name approval tasks carry in the task row.
APPROVAL_HANDLER = "approval"


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Workflow:
    """One approval task's workflow row."""

    task_id: str
    principal_digest: str
    tool_name: str
    arguments_digest: str
    binding_sealed: str | None
    tool_fingerprint: str | None
    phase: Phase
    generation: int
    backend: str
    handle: str | None
    template: str | None
    request_deadline: int | None
    approval_expires_at: int | None
    next_check_at: int
    attempts: int
    lease_owner: str | None
    lease_expires_at: int | None
    execution_deadline: int | None
    disposition: str | None
    created_at: int


def workflow_from_row(row: Mapping[Any, Any]) -> Workflow:
    return Workflow(
        task_id=row["task_id"],
        principal_digest=row["principal_digest"],
        tool_name=row["tool_name"],
        arguments_digest=row["arguments_digest"],
        binding_sealed=row["binding_ciphertext"],
        tool_fingerprint=row["tool_fingerprint"],
        phase=Phase(row["phase"]),
        generation=row["generation"],
        backend=row["backend"],
        handle=row["handle"],
        template=row["template"],
        request_deadline=row["request_deadline"],
        approval_expires_at=row["approval_expires_at"],
        next_check_at=row["next_check_at"],
        attempts=row["attempts"],
        lease_owner=row["lease_owner"],
        lease_expires_at=row["lease_expires_at"],
        execution_deadline=row["execution_deadline"],
        disposition=row["disposition"],
        created_at=row["created_at"],
    )


@dataclass(frozen=True)
class Intent:
    """A durable submission intent: the key and exact body of one backend submission."""

    key: str
    task_id: str
    generation: int
    principal_digest: str
    tool_name: str
    arguments_digest: str
    body_sealed: str
    state: IntentState
    handle: str | None
    created_at: int


def intent_from_row(row: Mapping[Any, Any]) -> Intent:
    return Intent(
        key=row["idempotency_key"],
        task_id=row["task_id"],
        generation=row["generation"],
        principal_digest=row["principal_digest"],
        tool_name=row["tool_name"],
        arguments_digest=row["arguments_digest"],
        body_sealed=row["body_ciphertext"],
        state=IntentState(row["state"]),
        handle=row["handle"],
        created_at=row["created_at"],
    )


class Admission(StrEnum):
    """What recording a new intent found."""

    RECORDED = "recorded"
    DUPLICATE = "duplicate"  # the same call is already pending: reuse that task
    OUTCOME_OWED = "outcome_owed"  # an ended request made without tasks owes this call its outcome
    RATE_LIMITED = "rate_limited"
    TOO_MANY_PENDING = "too_many_pending"
    TASK_LIMIT = "task_limit"  # the store holds max_tasks unfinished tasks
    PRINCIPAL_TASK_LIMIT = "principal_task_limit"  # the caller holds max_per_principal unfinished tasks
    REFUSED = "refused"  # the backend refused the submission for good (creation in one transaction)


@dataclass(frozen=True)
class Creation:
    """What a creation in one transaction did: its admission, and the task and request it made.

    Attributes:
        admission: :attr:`Admission.RECORDED` when the task was created; otherwise why not.
        task_id: the new task, or the existing one a duplicate or owed outcome names.
        handle: the backend request opened with the task (``None`` unless recorded).
        task: the task row as created (``None`` unless recorded).
    """

    admission: Admission
    task_id: str | None
    handle: str | None = None
    task: TaskRecord | None = None


@dataclass(frozen=True)
class NewWorkflow:
    """The task and workflow rows created once the backend's handle is persisted."""

    task_id: str
    intent_key: str
    principal_digest: str
    tool_name: str
    arguments_digest: str
    binding_sealed: str
    tool_fingerprint: str | None
    backend: str
    handle: str | None
    template: str | None
    request_deadline: int | None
    next_check_at: int
    ttl_ms: int | None
    poll_interval_ms: int
    status_message: str
    meta: dict[str, Any]
    #: Input requests the task starts with (``input_required``), before anything is submitted.
    input_requests: dict[str, dict[str, Any]] | None = None
    #: Opened for a client without tasks: the identical retry collects the outcome (once).
    owed_to_retry: bool = False


@dataclass(frozen=True)
class Reschedule:
    """When to look at a pending workflow again, and deadlines the backend moved.

    ``min_ttl_end`` extends the task's retention so it lasts at least until then.
    """

    task_id: str
    generation: int
    next_check_at: int
    attempts: int | None = None
    request_deadline: int | None = None
    approval_expires_at: int | None = None
    min_ttl_end: int | None = None

    @property
    def only_next_check(self) -> bool:
        """Whether nothing but the next look changes (the common case of a driver pass)."""
        return (
            self.attempts is None
            and self.request_deadline is None
            and self.approval_expires_at is None
            and self.min_ttl_end is None
        )


@dataclass(frozen=True)
class DueCheck:
    """What a driver pass reads of a due pending workflow before deciding whether to lease it."""

    task_id: str
    generation: int
    handle: str | None
    request_deadline: int | None
    created_at: int


@dataclass(frozen=True)
class TaskOutcome:
    """The final task write that accompanies a fence or a finish."""

    status: TaskStatus
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    disposition: str | None = None
    #: Why a call that did not run was refused (recorded in the audit event, shown to reviewers).
    reason: str | None = None


def call_scope(principal_digest: str, tool_name: str, arguments_digest: str) -> str:
    """The dedup scope of one call (principal, tool, arguments) as one key: hex SHA-256.

    Stored on intents and workflows and looked up alone, so each dedup read has exactly one index
    to use. Revision approval_0004 fills it for rows stored before it with the same formula.
    """
    return hashlib.sha256(f"{principal_digest}|{tool_name}|{arguments_digest}".encode()).hexdigest()


def intent_row(intent: Intent, now: int) -> dict[str, Any]:
    return {
        "idempotency_key": intent.key,
        "task_id": intent.task_id,
        "generation": intent.generation,
        "principal_digest": intent.principal_digest,
        "tool_name": intent.tool_name,
        "arguments_digest": intent.arguments_digest,
        "call_scope": call_scope(intent.principal_digest, intent.tool_name, intent.arguments_digest),
        "body_ciphertext": intent.body_sealed,
        "key_id": intent.body_sealed.partition(":")[0],
        "state": intent.state.value,
        "handle": intent.handle,
        "created_at": now,
        "updated_at": now,
    }


def workflow_row(new: NewWorkflow, now: int) -> dict[str, Any]:
    return {
        "task_id": new.task_id,
        "principal_digest": new.principal_digest,
        "tool_name": new.tool_name,
        "arguments_digest": new.arguments_digest,
        "call_scope": call_scope(new.principal_digest, new.tool_name, new.arguments_digest),
        "binding_ciphertext": new.binding_sealed,
        "key_id": new.binding_sealed.partition(":")[0],
        "tool_fingerprint": new.tool_fingerprint,
        "phase": Phase.PENDING.value,
        "generation": 1,
        "backend": new.backend,
        "handle": new.handle,
        "template": new.template,
        "request_deadline": new.request_deadline,
        "approval_expires_at": None,
        "next_check_at": new.next_check_at,
        "attempts": 0,
        "lease_owner": None,
        "lease_expires_at": None,
        "execution_deadline": None,
        "disposition": None,
        "created_at": now,
        "updated_at": now,
        "version": 0,
        "owed_to_retry": 1 if new.owed_to_retry else None,
    }
