"""The scenarios, in the order they run, each naming the SEP statements it checks.

Ids in ``checks`` are those of ``conformance/sep-2848.yaml``, ``sep-2643.yaml`` and ``sep-2663.yaml``.
``calls_tool`` says whether a scenario calls the gated tool: once the run has seen the tool run
without approval, none of those runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mcp_approval.checks import scenarios_basics as basics
from mcp_approval.checks import scenarios_decided as decided
from mcp_approval.checks import scenarios_fences as fences
from mcp_approval.checks import scenarios_notify as notify
from mcp_approval.checks import scenarios_pending as pending
from mcp_approval.checks import scenarios_remedies as remedies
from mcp_approval.checks import scenarios_retention as retention
from mcp_approval.checks import scenarios_scans as scans
from mcp_approval.checks.run import CheckRun

__all__ = ["SCENARIOS", "Scenario", "scenario"]

Step = Callable[[CheckRun, list[str], list[str]], Awaitable[str]]


@dataclass(frozen=True)
class Scenario:
    """A black-box scenario: its id, the statement ids it checks, the statement, and its steps.

    The steps return a one-line result and append evidence and notes; they raise ``Failed`` or ``Skipped``.
    """

    id: str
    checks: tuple[str, ...]
    statement: str
    run: Step
    calls_tool: bool = True


def _ids(*names: str) -> tuple[str, ...]:
    """Statement ids given without their ``sep-`` prefix: ``2848-at-most-once``."""
    return tuple(f"sep-{name}" for name in names)


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("declares-extensions", _ids("2663-server-advertises-extension", "2848-server-declares-both-extensions"),
             "The server declares the tasks extension and the tool-approval extension it builds on, and not the"
             " legacy tasks capability.", basics.declares_extensions, calls_tool=False),
    Scenario("removed-methods", _ids("2663-removed-methods-not-found"),
             "tasks/result and tasks/list are -32601: the tasks extension removed them.",
             basics.removed_methods, calls_tool=False),
    Scenario("unknown-task",
             _ids("2663-tasks-get-unknown-id", "2663-update-unknown-id", "2663-cancel-unknown-id",
                  "2663-envelope-errors-http-400"),
             "tasks/get of a task id never issued is -32602 with HTTP 400 (tasks/update and tasks/cancel should be).",
             basics.unknown_task, calls_tool=False),
    Scenario("no-tasks-client",
             _ids("2848-no-tasks-client", "2848-prefer-degraded-result", "2663-task-only-call-missing-capability",
                  "2663-no-task-unless-request-declares", "2643-server-task-needs-declared-tasks",
                  "2643-server-undisclosed-not-unavailable", "2643-undisclosed-remedy-in-content",
                  "2643-server-url-needs-declared-elicitation"),
             "A client that did not declare tasks gets -32021 naming the tasks extension, or a CallToolResult with"
             " isError: true and guidance (an envelope, if any, undisclosed), never a task nor a URL it did not"
             " declare; the tool does not run.",
             pending.no_tasks_client),
    Scenario("requestable-denial-returns-task",
             _ids("2848-requestable-returns-task-without-executing", "2848-no-execution-on-denial-alone",
                  "2643-server-pending-decision-not-executed", "2663-result-type-task-on-create",
                  "2663-readable-before-create-result"),
             "A requestable denial returns a working task with a statusMessage, readable at once, without executing"
             " the tool.", pending.returns_task_without_executing),
    Scenario("envelope-while-pending",
             _ids("2848-envelope-repeated-while-pending", "2643-server-task-envelope-repeated",
                  "2643-server-task-hint"),
             "The CreateTaskResult carries the SEP-2643 envelope (insufficient_authorization, available, a task"
             " hint), and tasks/get repeats it while the task is not terminal.", pending.envelope_while_pending),
    Scenario("tasks-methods-need-declaration",
             _ids("2663-tasks-methods-need-declaration", "2663-envelope-errors-http-400"),
             "tasks/get, tasks/update and tasks/cancel that do not declare the tasks extension are -32021 (HTTP"
             " 400), and change nothing.", basics.tasks_methods_need_declaration),
    Scenario("mcp-name-checked", _ids("2663-mcp-name-mismatch-rejected"),
             "A wrong or missing Mcp-Name on tasks/get is -32020 (HTTP 400); the base64 form of the task id is"
             " served.", basics.mcp_name_checked),
    Scenario("task-bound-to-principal",
             _ids("2663-task-access-by-principal", "2848-task-access-by-origin"),
             "Another principal can neither read, answer nor cancel a pending task.",
             pending.task_bound_to_principal),
    Scenario("dedup-scope",
             _ids("2848-dedup-returns-existing-task", "2663-task-access-by-principal", "2848-task-access-by-origin"),
             "While a task is pending, another principal's identical call never joins it (the dedup scope includes"
             " the principal); the owner's identical call should get it back.", pending.dedup_scope),
    Scenario("model-text-sanitized", _ids("2848-model-text-sanitized", "2848-security-model-text"),
             "Control and bidi characters in a call's arguments never reach statusMessage or the"
             " model-immediate response unsanitized.", pending.model_text_sanitized),
    Scenario("input-through-task-channel",
             _ids("2848-submission-input-channel", "2663-all-answered-resumes", "2663-mrtr-before-task",
                  "2663-input-requests-declared-kinds", "2663-update-ack-empty", "2663-input-keys-unique",
                  "2663-update-ignores-unknown-keys", "2663-partial-answers-keep-input-required"),
             "Submission input flows through the task input channel: input_required rounds on tools/call (no"
             " taskId), or input_required on the task answered with tasks/update (empty acknowledgements, keys never"
             " reused, unknown keys ignored, partial answers kept), after which the task is working.",
             pending.input_channel),
    Scenario("mrtr-retry-bound", _ids("2848-mrtr-retry-matches-binding"),
             "A retry echoing an input round's requestState with changed arguments, or from another principal, is"
             " rejected.", pending.mrtr_retry_bound),
    Scenario("task-notifications",
             _ids("2663-listen-task-ids-need-declaration", "2663-listen-ack-notified-ids-only",
                  "2663-notification-only-owned-ids", "2663-notification-per-status-change",
                  "2663-notification-equals-tasks-get", "2663-notification-subscription-id",
                  "2663-no-progress-on-task-stream"),
             "subscriptions/listen for taskIds needs the tasks extension; its acknowledgement lists only task ids"
             " the caller owns; each acknowledged task's status change is notified as tasks/get reads it.",
             notify.notifications),
    Scenario("per-request-declaration",
             _ids("2663-per-request-declaration", "2663-no-task-unless-request-declares",
                  "2663-legacy-capability-non-declaring", "2663-legacy-task-param-ignored"),
             "Only this request's declaration of the extension counts: the legacy tasks capability gets no task,"
             " and a legacy params.task is ignored.", basics.per_request_declaration),
    Scenario("legacy-connection-inert", _ids("2663-inert-on-legacy-connection"),
             "On a 2025-11-25 connection the tasks extension is inert: declaring it there gets no task.",
             basics.legacy_connection_inert),
    Scenario("approval-executes-at-most-once",
             _ids("2848-at-most-once", "2848-disposition-required", "2848-disposition-in-result-meta",
                  "2663-terminal-status-final", "2663-cancel-ack", "2848-terminal-never-failed"),
             "Approval resumes execution at most once: the task completes approved-executed, the tool ran once, and"
             " the completed task stays completed (a tasks/cancel of it is an empty acknowledgement).",
             decided.at_most_once),
    Scenario("approved-call-runs-as-bound",
             _ids("2848-binding-checked-before-execution", "2848-no-steering"),
             "The call that runs is the call that was approved: the witness shows the same tool and arguments.",
             decided.runs_as_bound),
    Scenario("executed-result-states-outcome",
             _ids("2848-body-states-outcome", "2848-body-disposition-envelope-agree",
                  "2643-server-no-envelope-after-execution"),
             "The executed result is this call's, its body does not say the tool did not run, and it carries no"
             " denial envelope (neither in the result nor on tasks/get).", decided.executed_result_states_outcome),
    Scenario("finished-task-bound-to-principal",
             _ids("2663-task-access-by-principal", "2848-task-access-by-origin"),
             "Another principal can neither read, answer nor cancel a completed task.",
             decided.finished_task_bound_to_principal),
    Scenario("changed-envelope-needs-approval",
             _ids("2848-no-steering", "2848-binding-checked-before-execution"),
             "A changed envelope (other arguments, other principal) requires a new approval: the approved call's"
             " approval does not run it.", decided.changed_envelope),
    Scenario("approval-is-not-a-standing-grant",
             _ids("2848-reevaluate-with-approval", "2848-terminal-is-final", "2848-no-execution-on-denial-alone"),
             "An approval is an input to one decision, not a standing grant: the same call made again after it ran"
             " needs an approval of its own.", decided.not_a_standing_grant),
    Scenario("terminal-denial-body",
             _ids("2848-body-states-outcome", "2848-disposition-in-result-meta",
                  "2848-body-disposition-envelope-agree", "2643-no-hints-unless-available"),
             "A terminal denial is a completed task whose CallToolResult is isError, marked denied-not-executed, with"
             " a body that states it (and, on a SEP-2643 server, the unavailable envelope without hints).",
             decided.terminal_denial_body),
    Scenario("terminal-denial-is-final",
             _ids("2848-terminal-is-final", "2663-terminal-status-final", "2848-terminal-never-failed"),
             "A denied task is final: a late approval neither reopens nor executes it.", decided.denial_is_final),
    Scenario("cancelled-task-never-executes",
             _ids("2848-never-executed-and-cancelled", "2848-cancel-withdraws-backend-request", "2663-cancel-ack"),
             "A cancelled task cannot later execute, even when its request is approved afterwards.",
             fences.cancelled_never_executes),
    Scenario("cancelled-notification-ignored",
             _ids("2848-notifications-cancelled-not-used", "2663-cancelled-notification-not-task-cancel"),
             "notifications/cancelled for the call that created a task does not cancel the task.",
             fences.cancelled_notification_ignored),
    Scenario("cancel-after-approval",
             _ids("2848-single-atomic-claim", "2848-checks-hold-at-claim", "2848-never-executed-and-cancelled"),
             "A cancel right after an approval either wins (cancelled, nothing ran) or loses to the execution"
             " (completed, ran once): the server never both executes and reports cancelled.",
             fences.cancel_after_approval),
    Scenario("expired-task-never-executes",
             _ids("2848-expiry-fences", "2848-terminal-is-final"),
             "An expired request ends its task completed as a denial (isError, denied-not-executed), and an"
             " approval afterwards changes nothing (runs with --expires-within).", fences.expired_never_executes),
    Scenario("policy-rechecked-at-execution",
             _ids("2848-reevaluate-with-approval", "2848-current-state-at-execution", "2848-risk-re-read"),
             "Policy changed to deny between approval and execution: the approval does not run the call (runs with"
             " --policy-command).", fences.policy_rechecked),
    Scenario("revoked-principal-not-executed",
             _ids("2848-invalid-principal-not-executed", "2848-current-state-at-execution"),
             "A principal revoked between approval and execution: the approval does not run the call (runs with"
             " --policy-command).", fences.revoked_principal),
    Scenario("non-requestable-denial",
             _ids("2848-non-requestable-normal-denial", "2643-server-envelope-in-meta"),
             "A denial no approval can lift is an ordinary isError result (its envelope offering no remedy), never"
             " a task (runs with --denied-arguments).", fences.non_requestable_denial),
    Scenario("url-remediation",
             _ids("2643-server-url-hint", "2643-server-url-input-required", "2643-server-url-state-travels",
                  "2643-server-url-retry-resumes"),
             "A client without tasks that declares URL elicitation may be sent to a URL: an input_required round"
             " with a url-mode request, the envelope's url hint, the state in requestState, and a retry that"
             " resumes the call.", remedies.url_remediation),
    Scenario("credential-challenge",
             _ids("2643-challenge-means-available", "2643-server-scope-challenge", "2643-server-rar-challenge",
                  "2643-server-credential-remediation", "2643-server-reference-stable"),
             "A token lacking the call's scope gets a denial naming its remedy (an insufficient_scope or"
             " insufficient_authorization challenge, or an authorization_remediation hint), never a bare 401/403"
             " (runs with --underscoped-token).", remedies.credential_challenge),
    Scenario("execution-error-outcome",
             _ids("2663-tool-error-is-completed", "2848-failure-after-claim-is-completed",
                  "2848-no-envelope-unless-denied", "2643-server-ordinary-failure-after-start"),
             "An approved call whose tool fails completes isError with execution-error, without the denial envelope"
             " (runs with --failing-arguments).", decided.execution_error_outcome),
    Scenario("task-retention",
             _ids("2663-create-result-shape", "2663-readable-for-ttl", "2848-retention-covers-pending-deadline",
                  "2848-retention-covers-terminal-result"),
             "createdAt plus ttlMs covers a pending task (past a short first ttlMs it is still there, its ttlMs"
             " grown) and each terminal result; createdAt never changes.", retention.retention),
    Scenario("context-id-not-authorization",
             _ids("2643-server-context-id-not-authorization", "2643-server-accepts-absent-or-unknown-context-id",
                  "2643-server-fresh-evaluation", "2643-server-context-id-opaque"),
             "An authorizationContextId is no authority: echoed by another principal it runs nothing, and an"
             " unknown one does not make a retry fail.", fences.context_id_not_authorization),
    Scenario("pending-not-presented-as-done",
             _ids("2848-pending-not-presented-as-completed", "2848-security-model-text"),
             "No statusMessage or model-immediate response of a pending task claims the action happened.",
             scans.pending_not_presented_as_done, calls_tool=False),
    Scenario("envelope-shape",
             _ids("2643-envelope-reason-required", "2643-envelope-remediation-required", "2643-hint-type-required",
                  "2643-no-hints-unless-available"),
             "Every envelope has a reason, one of the three remediations, typed hints, and hints only when"
             " available.", scans.envelope_shape, calls_tool=False),
    Scenario("wire-shapes",
             _ids("2663-no-task-result-type-elsewhere", "2663-result-type-complete", "2663-create-result-shape",
                  "2663-tasks-get-status-shaped", "2663-no-request-state-or-related-task",
                  "2663-failed-carries-error"),
             "Every answer of the run has the SEP-2663 shape of its method and, for a task, of its status.",
             scans.wire_shapes, calls_tool=False),
    Scenario("unguessable-task-ids", _ids("2663-unguessable-task-ids"),
             "Task ids are unguessable: not sequential, and about 128 random bits or more.",
             scans.unguessable_task_ids, calls_tool=False),
    Scenario("approval-stays-private", _ids("2848-task-access-by-origin"),
             "No statusMessage names the approver or quotes a decision's comment.",
             scans.approval_stays_private, calls_tool=False),
    Scenario("no-backend-artifacts",
             _ids("2848-retrieval-no-artifacts", "2848-no-backend-artifacts"),
             "Result retrieval does not expose backend artifacts: no answer of the run carried the backend's request"
             " ids, binding material or endpoints.", scans.no_backend_artifacts, calls_tool=False),
)  # fmt: skip


def scenario(scenario_id: str) -> Scenario:
    """The scenario with ``scenario_id`` (``KeyError`` when there is none)."""
    for item in SCENARIOS:
        if item.id == scenario_id:
            return item
    raise KeyError(scenario_id)
