"""The mutants of the SEP server (each breaks one statement) and its faithful variants (each differs where
the SEPs allow), with the scenarios that must fail on each mutant.

``python -m tests.checks.mutants`` prints the table ``docs/conformance.md`` carries (a test keeps the
two equal).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Mutant:
    """A server that breaks ``statement``: the kit must fail exactly ``kills`` (the first is the one
    whose statement it is) on it."""

    name: str
    statement: str
    kills: tuple[str, ...]
    what: str
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Variant:
    """A faithful server that differs where the SEPs allow: the kit must pass it."""

    name: str
    what: str
    settings: dict[str, Any] = field(default_factory=dict)


#: Requests lapse this soon on the servers that expire them.
EXPIRE_S = 2.0
EXPIRY = {"expire_s": EXPIRE_S}
BEFORE = {"inputs": "before"}

MUTANTS: tuple[Mutant, ...] = (
    # SEP-2848: execution only on approval, once, as bound.
    Mutant("executes-early", "sep-2848-requestable-returns-task-without-executing",
           ("requestable-denial-returns-task",), "runs the tool when it creates the task, before any decision"),
    Mutant("runs-twice", "sep-2848-at-most-once", ("approval-executes-at-most-once", "cancel-after-approval"),
           "runs an approved call twice"),
    Mutant("coerces-arguments", "sep-2848-binding-checked-before-execution", ("approved-call-runs-as-bound",),
           "runs the approved call with its amount turned into a string"),
    Mutant("approval-covers-recipient", "sep-2848-no-steering", ("changed-envelope-needs-approval",),
           "treats an approval as covering any amount to the same recipient"),
    Mutant("standing-grant", "sep-2848-reevaluate-with-approval", ("approval-is-not-a-standing-grant",),
           "runs the same call again at once after it was approved (a standing grant)"),
    Mutant("ignores-policy-change", "sep-2848-current-state-at-execution", ("policy-rechecked-at-execution",),
           "executes on approval against the policy of submission, not the current one"),
    Mutant("ignores-revoked-principal", "sep-2848-invalid-principal-not-executed", ("revoked-principal-not-executed",),
           "executes for a principal revoked after the approval"),
    Mutant("runs-after-cancel", "sep-2848-never-executed-and-cancelled", ("cancelled-task-never-executes",),
           "runs a cancelled call when its request is approved afterwards"),
    Mutant("cancel-ends-completed", "sep-2663-terminal-status-final",
           ("approval-executes-at-most-once", "cancel-after-approval"),
           "lets tasks/cancel turn an executed task into cancelled"),
    Mutant("late-approval-runs-denied", "sep-2848-terminal-is-final", ("terminal-denial-is-final",),
           "runs a denied call when it is approved afterwards"),
    Mutant("runs-after-expiry", "sep-2848-expiry-fences", ("expired-task-never-executes",),
           "runs an expired call when it is approved afterwards", EXPIRY),
    Mutant("expiry-ends-failed", "sep-2848-expiry-fences", ("expired-task-never-executes",),
           "ends a task whose request expired as failed, not as a completed denial", EXPIRY),
    Mutant("mrtr-retry-unbound", "sep-2848-mrtr-retry-matches-binding", ("mrtr-retry-bound",),
           "accepts an input round's requestState for other arguments or another principal", BEFORE),
    Mutant("skips-input", "sep-2848-submission-input-channel", ("input-through-task-channel",),
           "submits the request without asking the input its deployment needs"),
    # SEP-2848: what the client sees.
    Mutant("no-status-message", "sep-2848-requestable-returns-task-without-executing",
           ("requestable-denial-returns-task",), "creates the task without a statusMessage"),
    Mutant("meta-only-denial", "sep-2848-body-states-outcome", ("terminal-denial-body",),
           "marks a denial only in _meta: its body says 'Request closed.'"),
    Mutant("denial-says-will-run", "sep-2848-body-disposition-envelope-agree", ("terminal-denial-body",),
           "says in a denial's body that the payment will still run"),
    Mutant("executed-body-says-not-run", "sep-2848-body-states-outcome", ("executed-result-states-outcome",),
           "says in an executed call's body that the tool did not run"),
    Mutant("shows-other-result", "sep-2848-body-states-outcome", ("executed-result-states-outcome",),
           "shows the result of the call made before it"),
    Mutant("no-disposition", "sep-2848-disposition-required",
           ("approval-executes-at-most-once", "cancel-after-approval"),
           "completes an executed task without the disposition"),
    Mutant("denial-as-failed", "sep-2848-disposition-in-result-meta",
           ("terminal-denial-body", "terminal-denial-is-final", "policy-rechecked-at-execution",
            "revoked-principal-not-executed"),
           "ends a denied task failed instead of completed with denied-not-executed"),
    Mutant("execution-error-failed", "sep-2848-failure-after-claim-is-completed", ("execution-error-outcome",),
           "ends a task whose tool failed after the claim as failed"),
    Mutant("execution-error-with-envelope", "sep-2848-no-envelope-unless-denied", ("execution-error-outcome",),
           "puts the denial envelope on an execution error"),
    Mutant("pending-presented-done", "sep-2848-pending-not-presented-as-completed",
           ("pending-not-presented-as-done",), "tells the model a pending payment completed"),
    Mutant("echoes-arguments", "sep-2848-model-text-sanitized", ("model-text-sanitized",),
           "copies the call's arguments into statusMessage unsanitized"),
    Mutant("status-names-approver", "sep-2848-task-access-by-origin", ("approval-stays-private",),
           "names the approver in statusMessage"),
    Mutant("status-quotes-comment", "sep-2848-task-access-by-origin", ("approval-stays-private",),
           "quotes the reviewer's comment in statusMessage"),
    Mutant("leaks-request-id", "sep-2848-no-backend-artifacts", ("no-backend-artifacts",),
           "carries the backend's request id in a task's _meta (as binding_token)"),
    Mutant("non-requestable-becomes-task", "sep-2848-non-requestable-normal-denial", ("non-requestable-denial",),
           "makes a task of a denial no approval can lift"),
    Mutant("no-approval-extension", "sep-2848-server-declares-both-extensions", ("declares-extensions",),
           "does not declare io.modelcontextprotocol/tool-approval"),
    Mutant("short-ttl", "sep-2848-retention-covers-pending-deadline", ("task-retention",),
           "gives a request open for an hour a ttlMs of 2 s, never extended"),
    # SEP-2848 / SEP-2663: who may see a task.
    Mutant("completed-readable-by-other", "sep-2848-task-access-by-origin", ("finished-task-bound-to-principal",),
           "lets another principal read a completed task"),
    Mutant("update-from-other-accepted", "sep-2663-task-access-by-principal",
           ("task-bound-to-principal", "finished-task-bound-to-principal"),
           "accepts tasks/update from another principal"),
    Mutant("dedup-ignores-principal", "sep-2663-task-access-by-principal", ("dedup-scope",),
           "returns one principal's pending task to another principal's identical call"),
    # SEP-2643.
    Mutant("no-envelope-on-create", "sep-2643-server-task-hint", ("envelope-while-pending",),
           "creates the task without the envelope"),
    Mutant("envelope-not-repeated", "sep-2643-server-task-envelope-repeated", ("envelope-while-pending",),
           "does not repeat the envelope on tasks/get of a pending task"),
    Mutant("envelope-without-reason", "sep-2643-envelope-reason-required",
           ("envelope-while-pending", "envelope-shape"), "sends the pending envelope without a reason"),
    Mutant("denial-envelope-available", "sep-2848-body-disposition-envelope-agree", ("terminal-denial-body",),
           "classifies a terminal denial as remediation available"),
    Mutant("unavailable-with-hints", "sep-2643-no-hints-unless-available", ("terminal-denial-body", "envelope-shape"),
           "sends remediationHints with remediation unavailable"),
    Mutant("executed-keeps-envelope", "sep-2643-server-no-envelope-after-execution",
           ("executed-result-states-outcome", "execution-error-outcome"),
           "keeps the available envelope on a task once its tool ran"),
    Mutant("no-tasks-unavailable", "sep-2643-server-undisclosed-not-unavailable", ("no-tasks-client",),
           "answers a client without tasks with remediation unavailable"),
    Mutant("url-without-hint", "sep-2643-server-url-hint", ("url-remediation",),
           "sends a client to a URL with an envelope that has no url hint"),
    Mutant("url-to-undeclared", "sep-2643-server-url-needs-declared-elicitation", ("no-tasks-client",),
           "sends a client that declared only form elicitation to a URL"),
    Mutant("bare-403", "sep-2643-challenge-means-available", ("credential-challenge",),
           "answers a token lacking the scope with a bare 403 that names no remedy"),
    Mutant("context-id-authorizes", "sep-2643-server-context-id-not-authorization",
           ("context-id-not-authorization",), "runs a call that echoes a known authorizationContextId"),
    # SEP-2663.
    Mutant("no-tasks-gets-task", "sep-2663-no-task-unless-request-declares",
           ("no-tasks-client", "per-request-declaration", "legacy-connection-inert"),
           "returns a task to a client that did not declare tasks"),
    Mutant("no-tasks-wrong-code", "sep-2663-task-only-call-missing-capability", ("no-tasks-client",),
           "answers a client without tasks -32602"),
    Mutant("legacy-capability-declares", "sep-2663-legacy-capability-non-declaring", ("per-request-declaration",),
           "treats the legacy tasks capability as declaring the extension"),
    Mutant("legacy-connection-task", "sep-2663-inert-on-legacy-connection", ("legacy-connection-inert",),
           "makes tasks on a 2025-11-25 connection"),
    Mutant("unknown-task-method-not-found", "sep-2663-tasks-get-unknown-id", ("unknown-task",),
           "answers tasks/get of an unknown id -32601"),
    Mutant("tasks-list-served", "sep-2663-removed-methods-not-found", ("removed-methods",), "still serves tasks/list"),
    Mutant("undeclared-tasks-served", "sep-2663-tasks-methods-need-declaration", ("tasks-methods-need-declaration",),
           "serves tasks/* to requests that did not declare the extension"),
    Mutant("mcp-name-unchecked", "sep-2663-mcp-name-mismatch-rejected", ("mcp-name-checked",),
           "serves tasks/get whatever Mcp-Name says"),
    Mutant("not-readable-at-once", "sep-2663-readable-before-create-result",
           ("requestable-denial-returns-task", "model-text-sanitized", "changed-envelope-needs-approval",
            "approval-is-not-a-standing-grant"),
           "answers the first tasks/get after creation -32602"),
    Mutant("sequential-task-ids", "sep-2663-unguessable-task-ids", ("unguessable-task-ids",),
           "numbers its tasks task-000001, task-000002, ..."),
    Mutant("created-at-changes", "sep-2663-readable-for-ttl", ("task-retention", "task-notifications"),
           "reports another createdAt on tasks/get than on the CreateTaskResult"),
    Mutant("legacy-ttl-field", "sep-2663-create-result-shape", ("task-retention", "wire-shapes"),
           "names ttlMs ttl on the CreateTaskResult"),
    Mutant("get-result-type-task", "sep-2663-result-type-complete", ("wire-shapes",),
           "answers tasks/get with resultType task"),
    Mutant("working-carries-result", "sep-2663-tasks-get-status-shaped", ("wire-shapes",),
           "puts a result member on a working task"),
    Mutant("update-ack-with-task", "sep-2663-update-ack-empty", ("input-through-task-channel",),
           "acknowledges tasks/update with the task instead of an empty result"),
    Mutant("cancel-ack-with-task", "sep-2663-cancel-ack",
           ("approval-executes-at-most-once", "cancelled-task-never-executes"),
           "acknowledges tasks/cancel with the task instead of an empty result"),
    Mutant("cancelled-notification-cancels", "sep-2663-cancelled-notification-not-task-cancel",
           ("cancelled-notification-ignored",), "cancels a task on notifications/cancelled for its tools/call"),
    Mutant("listen-undeclared-accepted", "sep-2663-listen-task-ids-need-declaration", ("task-notifications",),
           "accepts a listen for taskIds that did not declare the extension"),
    Mutant("listen-acks-foreign-ids", "sep-2663-notification-only-owned-ids", ("task-notifications",),
           "acknowledges task ids the caller does not own"),
    Mutant("notification-differs", "sep-2663-notification-equals-tasks-get", ("task-notifications",),
           "notifies a task other than tasks/get reads it"),
)  # fmt: skip

VARIANTS: tuple[Variant, ...] = (
    Variant("faithful", "every statement kept: input in the task, listen on, SEP-2643 declared"),
    Variant("other-wording", "other texts throughout (a denial: 'the tool was not called and no money moved')",
            {"wording": "other"}),
    Variant("input-before-task", "asks the input in an input round on tools/call, before the task", BEFORE),
    Variant("no-input", "asks no submission input", {"inputs": "none"}),
    Variant("listen-acks-none", "offers subscriptions/listen but agrees to notify no task (as the SDK's default)",
            {"listen": "none"}),
    Variant("no-listen", "offers no subscriptions/listen (-32601)", {"listen": "off"}),
    Variant("expiring-requests", f"lets requests expire after {EXPIRE_S:g} s", EXPIRY),
    Variant("no-sep-2643", "does not implement SEP-2643: no envelope anywhere", {"denials": False}),
    Variant("missing-capability-32003", "answers a client without tasks -32003, the number SEP-2848's text gives",
            {"missing_capability": -32003}),
)  # fmt: skip


def table() -> str:
    """The mutant table of ``docs/conformance.md``: mutant, statement broken, scenario that kills it."""
    rows = ["| mutant | statement it breaks | scenario that kills it | what the server does |", "|---|---|---|---|"]
    for mutant in MUTANTS:
        kills = ", ".join(f"`{name}`" for name in mutant.kills)
        rows.append(f"| `{mutant.name}` | `{mutant.statement}` | {kills} | {mutant.what} |")
    rows += ["", "| faithful variant | how it differs |", "|---|---|"]
    rows += [f"| `{variant.name}` | {variant.what} |" for variant in VARIANTS]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(table(), end="")
