"""Options of the tool-approval enforcement point."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class ApprovalOptions:
    """How :class:`~mcp_approval.approval.ToolApproval` runs.

    Args:
        result_retention_s: how long a terminal approval task stays retrievable.
        max_pending_s: the longest request window accepted (a later policy or backend deadline is cut).
        default_deadline_s: the request deadline when the policy gives none.
        execution_deadline_s: an execution still unconfirmed this long after its claim ends
            ``outcome-unknown``.
        max_generations: chained approval requests per task before it ends as a denial.
        submissions_per_minute: approval submissions one principal may make per minute.
        max_pending_per_principal: pending approval tasks one principal may hold.
        poll_interval_s: how often a pending request's backend status is fetched.
        task_poll_interval_s: the ``pollIntervalMs`` suggested to clients.
        without_tasks: requestable denials of clients that did not declare tasks: ``degraded``
            (``isError`` + ``undisclosed`` + guidance, the SEP's preference) or ``error`` (-32021).
        intent_grace_s: an intent this old with no task is an orphan of a crash and is reconciled.
        lease_s: how long one worker holds a workflow it is checking or executing before
            another may take it over.
        max_retry_backoff_s: the cap of the exponential backoff for ``retry`` re-evaluations.
        submission_inputs: per approval template, the text fields the requester supplies before
            submission (an MRTR ``input_required`` round on the ``tools/call``).
        inputs_in_task: templates whose inputs are asked inside the task instead (it starts
            ``input_required`` and is submitted once ``tasks/update`` answers).
    """

    result_retention_s: float = 86_400.0
    max_pending_s: float = 7 * 86_400.0
    default_deadline_s: float = 86_400.0
    execution_deadline_s: float = 300.0
    max_generations: int = 3
    submissions_per_minute: int = 30
    max_pending_per_principal: int = 50
    poll_interval_s: float = 2.0
    task_poll_interval_s: float = 2.0
    without_tasks: Literal["degraded", "error"] = "degraded"
    intent_grace_s: float = 30.0
    lease_s: float = 15.0
    max_retry_backoff_s: float = 60.0
    submission_inputs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    inputs_in_task: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        positive = (
            "result_retention_s",
            "max_pending_s",
            "default_deadline_s",
            "execution_deadline_s",
            "poll_interval_s",
            "task_poll_interval_s",
            "lease_s",
            "max_retry_backoff_s",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"ApprovalOptions.{name} must be > 0")
        if self.intent_grace_s < 0:
            raise ValueError("ApprovalOptions.intent_grace_s must be >= 0")
        if min(self.max_generations, self.submissions_per_minute, self.max_pending_per_principal) < 1:
            raise ValueError("ApprovalOptions limits must be >= 1")
        if self.without_tasks not in ("degraded", "error"):
            raise ValueError("ApprovalOptions.without_tasks must be 'degraded' or 'error'")
