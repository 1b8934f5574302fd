"""The ARAP wire, PEP side: what goes into an Access Request and what comes back (ARAP §2.2-§2.9).

Pure functions, no I/O, so each rule is testable on its own:

- :func:`submission_body`: the Access Request body (S/R/A, the request context, the echoed denial).
- :func:`parse_task_response`: a Task Handle response read into an :class:`ApprovalState`, failing
  safe (an unknown status keeps polling and is never approval; an unknown ``result.mode`` or a
  malformed approval is not approval).
- :func:`problem_code`: the ``urn:openid:authzen:access-request:error:<code>`` of a problem document.
- :func:`encode_handle` / :func:`decode_handle`: the durable handle the server stores.
- :func:`poll_delay_s`: exponential backoff with equal jitter, capped, never under ``Retry-After``.
- :func:`callback_state`: the opaque ``callback.state`` bound to one submission key.

The PEP never opens ``binding_token`` or ``approval.state``: both are carried as received.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import rfc8785

from mcp_approval.backends.contract import ApprovalState, ApprovalStatus, ApprovalSubmission
from mcp_approval.clock import parse_iso8601
from mcp_approval.errors import MCPApprovalError
from mcp_approval.protocol import ARAP_ERROR_PREFIX, ARAP_MODE_REEVALUATE

__all__ = [
    "MAX_POLL_DELAY_S",
    "ArapProtocolError",
    "TaskResponse",
    "callback_state",
    "decode_handle",
    "encode_handle",
    "parse_task_response",
    "poll_delay_s",
    "problem_code",
    "retry_after_seconds",
    "submission_body",
]

#: The longest wait between two status polls (ARAP §2.5: backoff "capped at 60 s").
MAX_POLL_DELAY_S: Final = 60.0
_STATUSES: Final = {status.value: status for status in ApprovalStatus}
_STATE_LABEL: Final = b"mcp-approval arap callback state\x00"


class ArapProtocolError(MCPApprovalError, ValueError):
    """A response that does not follow the ARAP wire (missing task, wrong types, no id)."""


def submission_body(
    submission: ApprovalSubmission,
    *,
    client_name: str | None = None,
    callback: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The Access Request body for ``submission`` (ARAP §2.3).

    The request context goes unchanged; the requester's submission inputs are added only as
    members the context does not already have (never altering authorization-relevant ones).

    Raises:
        ArapProtocolError: the submission carries no denied evaluation.
    """
    evaluation = submission.evaluation
    if evaluation is None:
        raise ArapProtocolError("this approval request carries no requestable denial to submit")
    body: dict[str, Any] = {
        "subject": dict(evaluation.subject),
        "resource": dict(evaluation.resource),
        "action": dict(evaluation.action),
    }
    context = dict(evaluation.context) if evaluation.context is not None else None
    for name, value in (submission.inputs or {}).items():
        context = context if context is not None else {}
        context.setdefault(name, value)
    if context is not None:
        body["context"] = context
    body["denial"] = dict(evaluation.denial)
    if client_name:
        body["client"] = {"name": client_name}
    if callback is not None:
        body["callback"] = dict(callback)
    return body


@dataclass(frozen=True)
class TaskResponse:
    """A Task Handle response, read: the state plus the handle's URLs."""

    task_id: str
    status_endpoint: str
    cancel: str | None
    state: ApprovalState


def parse_task_response(document: Any, *, retry_after_s: float | None = None) -> TaskResponse:
    """Read ``{task, result?}`` (ARAP §2.4-§2.6) into a :class:`TaskResponse`.

    - an unknown ``task.status`` is never approval: it reads as ``pending`` (keep polling until
      ``task.expires_at``), with ``details["unrecognized_status"]``;
    - ``approved`` counts only with ``result.mode == "reevaluate"`` and an approval carrying a
      string ``id`` and a parseable ``approved_until``; otherwise it reads as ``failed``;
    - the approval object is kept exactly as received (it goes to ``context.approval`` unchanged).

    Raises:
        ArapProtocolError: no ``task`` object, or no string ``id`` / ``status_endpoint``.
    """
    if not isinstance(document, Mapping) or not isinstance(document.get("task"), Mapping):
        raise ArapProtocolError("the response has no task object")
    task = document["task"]
    task_id, endpoint = task.get("id"), task.get("status_endpoint")
    if not isinstance(task_id, str) or not task_id or not isinstance(endpoint, str) or not endpoint:
        raise ArapProtocolError("the task has no id or status_endpoint")
    links = task.get("links")
    cancel = links.get("cancel") if isinstance(links, Mapping) else None
    deadline = parse_iso8601(task.get("expires_at"))
    raw_status = task.get("status")
    status = _STATUSES.get(raw_status) if isinstance(raw_status, str) else None
    if status is None:
        details = {"unrecognized_status": str(raw_status)}
        state = ApprovalState(
            ApprovalStatus.PENDING, deadline_ms=deadline, retry_after_s=retry_after_s, details=details
        )
    elif status is ApprovalStatus.APPROVED:
        state = _approved_state(document.get("result"), deadline)
    else:
        state = ApprovalState(status, deadline_ms=deadline, retry_after_s=retry_after_s)
    return TaskResponse(task_id, endpoint, cancel if isinstance(cancel, str) else None, state)


def _approved_state(result: Any, deadline: int | None) -> ApprovalState:
    """``approved`` with an enforceable result, or ``failed`` (never approval without one)."""
    if not isinstance(result, Mapping) or result.get("mode") != ARAP_MODE_REEVALUATE:
        mode = result.get("mode") if isinstance(result, Mapping) else None
        return ApprovalState(ApprovalStatus.FAILED, details={"unusable_result": f"mode {mode!r}"})
    approval = result.get("approval")
    if not isinstance(approval, Mapping) or not isinstance(approval.get("id"), str) or not approval["id"]:
        return ApprovalState(ApprovalStatus.FAILED, details={"unusable_result": "no approval id"})
    until = parse_iso8601(approval.get("approved_until"))
    if until is None:
        return ApprovalState(ApprovalStatus.FAILED, details={"unusable_result": "no approved_until"})
    return ApprovalState(
        ApprovalStatus.APPROVED, approval=dict(approval), approved_until_ms=until, deadline_ms=deadline
    )


def retry_after_seconds(header: str | None) -> float | None:
    """An HTTP ``Retry-After`` delta-seconds value (an HTTP date or garbage reads as absent)."""
    if header is None:
        return None
    try:
        value = float(header.strip())
    except ValueError:
        return None
    return value if value >= 0 else None


def problem_code(document: Any) -> str | None:
    """The ARAP error code of a problem document (``not_requestable``, ...), if it names one."""
    kind = document.get("type") if isinstance(document, Mapping) else None
    if isinstance(kind, str) and kind.startswith(ARAP_ERROR_PREFIX):
        return kind[len(ARAP_ERROR_PREFIX) :]
    return None


def encode_handle(task_id: str, status_endpoint: str) -> str:
    """The durable handle: canonical JSON of the task id and its status endpoint.

    A callback names both, so the handle it refers to is rebuilt exactly from it.
    """
    return rfc8785.dumps({"id": task_id, "status_endpoint": status_endpoint}).decode()


def decode_handle(handle: str) -> tuple[str, str]:
    """``(task id, status endpoint)`` of a handle :func:`encode_handle` made.

    Raises:
        ArapProtocolError: not such a handle.
    """
    try:
        document = json.loads(handle)
    except ValueError as exc:
        raise ArapProtocolError("not an ARAP handle") from exc
    if not isinstance(document, dict):
        raise ArapProtocolError("not an ARAP handle")
    task_id, endpoint = document.get("id"), document.get("status_endpoint")
    if not isinstance(task_id, str) or not isinstance(endpoint, str):
        raise ArapProtocolError("not an ARAP handle")
    return task_id, endpoint


def poll_delay_s(
    attempt: int,
    *,
    base_s: float,
    cap_s: float = MAX_POLL_DELAY_S,
    retry_after_s: float | None = None,
    rng: random.Random | None = None,
) -> float:
    """How long to wait before status poll number ``attempt + 1`` (ARAP §2.5).

    Exponential from ``base_s`` with equal jitter (half fixed, half random), never above
    ``cap_s`` (at most 60 s), and never below the server's ``Retry-After``, which always wins.
    """
    cap = min(cap_s, MAX_POLL_DELAY_S)
    ceiling = min(cap, base_s * float(2 ** min(max(attempt, 0), 30)))
    source = rng or random.SystemRandom()
    delay = ceiling / 2 + source.uniform(0, ceiling / 2)
    return max(delay, retry_after_s or 0.0)


def callback_state(secret: str, key: str) -> str:
    """The ``callback.state`` sent with the submission under ``key``: an HMAC only this server can make."""
    mac = hmac.new(secret.encode(), _STATE_LABEL + key.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(mac).rstrip(b"=").decode()
