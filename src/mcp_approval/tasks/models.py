"""Task records and their wire forms (SEP-2663 on MCP 2026-07-28)."""

from __future__ import annotations

import functools
import hashlib
import secrets
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from pydantic import Field, StrictStr

from mcp_approval.clock import iso8601
from mcp_approval.protocol import RESULT_TYPE_COMPLETE, RESULT_TYPE_TASK
from mcp_approval.tasks.states import TERMINAL, TaskStatus

__all__ = [
    "MAX_TASK_ID_LENGTH",
    "TaskIdParams",
    "TaskRecord",
    "UpdateTaskParams",
    "create_task_result",
    "detailed_task",
    "error_document",
    "new_task_id",
    "principal_digest",
    "result_document",
    "task_fields",
]

#: Task ids longer than this are rejected before any lookup.
MAX_TASK_ID_LENGTH = 128


def new_task_id() -> str:
    """A fresh, unguessable task id: 256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


@functools.lru_cache(maxsize=4096)
def principal_digest(principal: str) -> str:
    """The SHA-256 hex digest under which a principal is stored (never the raw identity)."""
    return hashlib.sha256(principal.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TaskRecord:
    """One stored task, as the store returns it."""

    task_id: str
    principal_digest: str | None
    tool_name: str
    status: TaskStatus
    created_at: int
    updated_at: int
    ttl_ms: int | None
    poll_interval_ms: int | None
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    input_responses: dict[str, Any] = field(default_factory=dict)
    input_seq: int = 0
    cancel_requested: bool = False
    owner: str | None = None
    lease_expires_at: int | None = None
    version: int = 0
    #: The component that drives the task when no in-process execution runs it (e.g. ``"approval"``).
    handler: str | None = None
    #: ``_meta`` repeated on the task's results while it is not terminal (e.g. a denial envelope).
    meta: dict[str, Any] | None = None

    @property
    def terminal(self) -> bool:
        """Whether the task reached a status that never changes again."""
        return self.status in TERMINAL

    @property
    def expires_at(self) -> int | None:
        """When the task may be purged, or ``None`` for unlimited retention."""
        return None if self.ttl_ms is None else self.created_at + self.ttl_ms

    def expired(self, now_ms: int) -> bool:
        """Whether the retention period has elapsed at ``now_ms``."""
        expires = self.expires_at
        return expires is not None and now_ms >= expires


def task_fields(record: TaskRecord) -> dict[str, Any]:
    """The ``Task`` members shared by ``CreateTaskResult``, ``tasks/get`` and notifications."""
    body: dict[str, Any] = {
        "taskId": record.task_id,
        "status": record.status.value,
        "createdAt": iso8601(record.created_at),
        "lastUpdatedAt": iso8601(record.updated_at),
        "ttlMs": record.ttl_ms,  # present even when null: the key is required
    }
    if record.status_message is not None:
        body["statusMessage"] = record.status_message
    if record.poll_interval_ms is not None:
        body["pollIntervalMs"] = record.poll_interval_ms
    return body


def create_task_result(record: TaskRecord, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The flat ``CreateTaskResult`` answered to ``tools/call`` (no outcome fields, ever).

    ``meta`` (else the task's own non-terminal ``_meta``) rides along as ``_meta``.
    """
    body = {"resultType": RESULT_TYPE_TASK, **task_fields(record)}
    meta = meta if meta is not None else _pending_meta(record)
    if meta:
        body["_meta"] = meta
    return body


def _pending_meta(record: TaskRecord) -> dict[str, Any] | None:
    return None if record.terminal else record.meta


def detailed_task(record: TaskRecord) -> dict[str, Any]:
    """The status-shaped ``DetailedTask`` that ``tasks/get`` returns."""
    body = task_fields(record)
    if record.status is TaskStatus.COMPLETED and record.result is not None:
        body["result"] = record.result
    elif record.status is TaskStatus.FAILED and record.error is not None:
        body["error"] = record.error
    elif record.status is TaskStatus.INPUT_REQUIRED:
        body["inputRequests"] = dict(record.input_requests)
    meta = _pending_meta(record)
    if meta:
        body["_meta"] = meta
    return body


def result_document(result: Any) -> dict[str, Any]:
    """Serialize a tool's result for storage, as the complete result the call would have returned."""
    if isinstance(result, types.Result):
        document = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    else:
        document = dict(result)
    document["resultType"] = RESULT_TYPE_COMPLETE
    return document


def error_document(code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC error object for a ``failed`` task."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return error


class TaskIdParams(types.RequestParams):
    """Params of ``tasks/get`` and ``tasks/cancel``."""

    task_id: StrictStr = Field(alias="taskId", max_length=MAX_TASK_ID_LENGTH)


class UpdateTaskParams(TaskIdParams):
    """Params of ``tasks/update``: answers keyed by outstanding input request keys."""

    input_responses: dict[str, Any] = Field(alias="inputResponses")
