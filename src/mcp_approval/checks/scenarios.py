"""The scenarios, in the order they run, each naming the SEP statements it checks.

Ids in ``checks`` are those of ``conformance/sep-2848.yaml``, ``sep-2643.yaml`` and ``sep-2663.yaml``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mcp_approval.checks import scenarios_approval as approval
from mcp_approval.checks import scenarios_tasks as tasks
from mcp_approval.checks.session import Session

__all__ = ["SCENARIOS", "Scenario"]


@dataclass(frozen=True)
class Scenario:
    """A black-box scenario: its id, the statement ids it checks, the statement, and its steps.

    The steps return a one-line result and append evidence; they raise ``Failed`` or ``Skipped``.
    """

    id: str
    checks: tuple[str, ...]
    statement: str
    run: Callable[[Session, list[str]], Awaitable[str]]


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "declares-extensions",
        ("sep-2663-server-advertises-extension", "sep-2848-server-declares-both-extensions"),
        "The server declares the tasks extension (and the tool-approval extension it builds on).",
        tasks.declares_extensions,
    ),
    Scenario(
        "no-tasks-client",
        ("sep-2848-no-tasks-client", "sep-2663-task-only-call-missing-capability"),
        "A client that did not declare tasks gets -32021 naming the tasks extension, or a CallToolResult with"
        " isError: true, and the tool does not run.",
        approval.no_tasks_client,
    ),
    Scenario(
        "requestable-denial-returns-task",
        ("sep-2848-requestable-returns-task-without-executing", "sep-2663-result-type-task-on-create"),
        "A requestable denial returns a task without executing the tool.",
        approval.returns_task_without_executing,
    ),
    Scenario(
        "envelope-while-pending",
        (
            "sep-2848-envelope-repeated-while-pending",
            "sep-2643-server-task-envelope-repeated",
            "sep-2643-server-task-hint",
        ),
        "The CreateTaskResult carries the SEP-2643 envelope (insufficient_authorization, available, a task"
        " hint), and tasks/get repeats it while the task is not terminal.",
        approval.envelope_while_pending,
    ),
    Scenario(
        "task-bound-to-principal",
        ("sep-2663-task-access-by-principal", "sep-2848-task-access-by-origin"),
        "Another principal can neither read nor cancel the task.",
        tasks.bound_to_principal,
    ),
    Scenario(
        "unknown-task",
        ("sep-2663-tasks-get-unknown-id",),
        "tasks/get of a task id the server never issued is a JSON-RPC error.",
        tasks.unknown_task,
    ),
    Scenario(
        "task-ttl",
        ("sep-2663-create-result-shape", "sep-2663-readable-for-ttl"),
        "A task carries createdAt and ttlMs, and stays readable (with an unchanged createdAt) while it lives.",
        tasks.ttl,
    ),
    Scenario(
        "task-notifications",
        ("sep-2663-notification-per-status-change", "sep-2663-notification-equals-tasks-get"),
        "When the server offers subscriptions/listen, a status change of the task is notified, with the task as"
        " tasks/get reports it.",
        tasks.notifications,
    ),
    Scenario(
        "input-through-task-channel",
        ("sep-2848-submission-input-channel", "sep-2663-all-answered-resumes"),
        "Submission input flows through the task input channel: an input_required round on tools/call, or"
        " input_required on the task answered with tasks/update, after which the task is working.",
        approval.input_channel,
    ),
    Scenario(
        "approval-executes-at-most-once",
        (
            "sep-2848-at-most-once",
            "sep-2848-disposition-required",
            "sep-2663-terminal-status-final",
            "sep-2643-server-no-envelope-after-execution",
        ),
        "Approval resumes execution at most once: the task completes approved-executed (with no denial envelope)"
        " and the tool ran once.",
        approval.at_most_once,
    ),
    Scenario(
        "terminal-denial-body",
        (
            "sep-2848-body-states-outcome",
            "sep-2848-disposition-in-result-meta",
            "sep-2848-body-disposition-envelope-agree",
        ),
        "A terminal denial is a completed task whose CallToolResult body (not only _meta) marks it"
        " denied-not-executed, distinct from an execution error.",
        approval.terminal_denial_body,
    ),
    Scenario(
        "changed-envelope-needs-approval",
        ("sep-2848-no-steering", "sep-2848-binding-checked-before-execution"),
        "A changed envelope (other arguments, other principal) requires a new approval: the approved call's"
        " approval does not run it.",
        approval.changed_envelope,
    ),
    Scenario(
        "cancelled-task-never-executes",
        ("sep-2848-never-executed-and-cancelled", "sep-2663-cancel-ack"),
        "A cancelled task cannot later execute, even when its request is approved afterwards.",
        approval.cancelled_never_executes,
    ),
    Scenario(
        "expired-task-never-executes",
        ("sep-2848-expiry-fences", "sep-2848-terminal-is-final"),
        "An expired task cannot later execute: once its request lapses the task ends without running, and an"
        " approval afterwards changes nothing (runs with --expires-within).",
        approval.expired_never_executes,
    ),
    Scenario(
        "no-backend-artifacts",
        ("sep-2848-retrieval-no-artifacts", "sep-2848-no-backend-artifacts"),
        "Result retrieval does not expose backend artifacts: no answer of the run carried the backend's request"
        " ids, binding material or endpoints.",
        approval.no_backend_artifacts,
    ),
)
