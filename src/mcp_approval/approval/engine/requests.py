"""The values a new approval request is made of: the submission, its intent, its task rows.

Pure functions of their arguments (the time is passed in, and only :func:`new_intent` draws
randomness, for its idempotency key): the enforcement point and the workflow driver build the same
requests from them, and they are tested without a database or a backend.
"""

from __future__ import annotations

import secrets

from mcp_approval.approval.binding import CallBinding
from mcp_approval.approval.messages import DEADLINE_TEXT, PENDING_TEXT
from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.approval.persistence.records import Intent, NewWorkflow
from mcp_approval.approval.persistence.states import IntentState
from mcp_approval.approval.results import sanitize_model_text
from mcp_approval.backends import ApprovalSubmission, DeniedEvaluation
from mcp_approval.clock import iso8601, parse_iso8601
from mcp_approval.denials import Remediation, TaskHint, denial_envelope
from mcp_approval.keyring import BindingCipher
from mcp_approval.policy import Decision, EvaluationRequest
from mcp_approval.protocol import META_TOOL_APPROVAL_DEADLINE

__all__ = ["new_intent", "new_workflow", "request_deadline", "status_message", "submission_for"]

#: A status message's bound (:func:`sanitize_model_text`'s default, which would cut the deadline off).
_MAX_STATUS_CHARS = 300


def submission_for(
    binding: CallBinding, decision: Decision, request: EvaluationRequest, *, options: ApprovalOptions, now: int
) -> ApprovalSubmission:
    """The backend request for a call the policy denied requestably (display, deadline, evaluation).

    ``request`` is the policy request ``decision`` answered (the call's, as the gate or the
    re-evaluation mapped it): ARAP backends receive it unchanged, with the raw denial members.
    """
    denial = decision.requestable_denial
    hint = denial.access_request if denial is not None else None
    display = (hint.display if hint is not None else None) or {}
    title = display.get("title")
    description = display.get("description")
    return ApprovalSubmission(
        tool=binding.tool,
        arguments=dict(binding.arguments),
        requester=binding.principal,
        template=hint.template if hint is not None else None,
        title=title if isinstance(title, str) else None,
        description=description if isinstance(description, str) else None,
        deadline_ms=request_deadline(hint.expires_at if hint is not None else None, options=options, now=now),
        reason=decision.reason,
        evaluation=DeniedEvaluation.from_decision(request.to_wire(), decision.context),
    )


def request_deadline(expires_at: str | None, *, options: ApprovalOptions, now: int) -> int:
    """When a request lapses: the policy's ``expires_at`` (never past ``max_pending_s``), else the default."""
    longest = now + round(options.max_pending_s * 1000)
    parsed = parse_iso8601(expires_at)  # None when absent or unreadable: the default deadline
    if parsed is None:
        return min(longest, now + round(options.default_deadline_s * 1000))
    return max(now, min(longest, parsed))


def new_intent(
    task_id: str,
    generation: int,
    binding: CallBinding,
    submission: ApprovalSubmission,
    *,
    owner: str,
    cipher: BindingCipher,
    now: int,
) -> Intent:
    """A fresh submission intent: a new 256-bit idempotency key and the exact body, sealed under it."""
    key = secrets.token_urlsafe(32)
    return Intent(
        key=key,
        task_id=task_id,
        generation=generation,
        principal_digest=owner,
        tool_name=binding.tool,
        arguments_digest=binding.digest,
        body_sealed=cipher.seal(submission.to_json(), record=key),
        state=IntentState.OPEN,
        handle=None,
        created_at=now,
    )


def new_workflow(
    task_id: str,
    binding: CallBinding,
    submission: ApprovalSubmission,
    *,
    intent_key: str,
    owner: str,
    handle: str | None,
    backend: str,
    cipher: BindingCipher,
    options: ApprovalOptions,
    now: int,
) -> NewWorkflow:
    """The task and workflow rows of a new approval task (``handle`` is ``None`` until submitted).

    ``backend`` is the backend's name; the binding is sealed under the task id.
    """
    deadline = submission.deadline_ms or now + round(options.default_deadline_s * 1000)
    envelope = denial_envelope(Remediation.AVAILABLE, hints=[TaskHint()])
    return NewWorkflow(
        task_id=task_id,
        intent_key=intent_key,
        principal_digest=owner,
        tool_name=binding.tool,
        arguments_digest=binding.digest,
        binding_sealed=cipher.seal(binding.to_json(), record=task_id),
        tool_fingerprint=binding.tool_fingerprint,
        backend=backend,
        handle=handle,
        template=submission.template,
        request_deadline=deadline,
        # The first look waits a poll interval: a backend that decides sooner (an automatic
        # resolver, a reviewer) wakes the workflow driver itself.
        next_check_at=now + round(options.poll_interval_s * 1000),
        ttl_ms=deadline - now + round(options.result_retention_s * 1000),
        poll_interval_ms=max(1, round(options.task_poll_interval_s * 1000)),
        status_message=status_message(binding.tool, submission, deadline),
        # The deadline also in _meta, machine-readable: a tasks client sizes its own wait by it.
        meta={**envelope.meta(), META_TOOL_APPROVAL_DEADLINE: iso8601(deadline)},
    )


def status_message(tool: str, submission: ApprovalSubmission, deadline_ms: int) -> str:
    """The task's status while it waits: the request's description or title, what is pending, the deadline.

    A long description is shortened so the pending text and the deadline always fit.
    """
    pending = f"{PENDING_TEXT.format(tool=tool)} {DEADLINE_TEXT.format(deadline=iso8601(deadline_ms))}"
    described = submission.description or submission.title
    room = _MAX_STATUS_CHARS - len(pending) - 2
    if described and room > 0:
        shortened = sanitize_model_text(described, limit=room).rstrip(".")
        return sanitize_model_text(f"{shortened}. {pending}", limit=_MAX_STATUS_CHARS)
    return sanitize_model_text(pending, limit=_MAX_STATUS_CHARS)
