"""Scenarios on what fences a pending call off from running: cancellation, expiry, current policy,
a valid principal; and on denials no approval can lift."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from mcp_approval.checks.judge import PENDING, TERMINAL, body_text, denial_body_problem, disposition, envelope, member
from mcp_approval.checks.outside import Call, PolicyAction, change_policy
from mcp_approval.checks.report import Failed, Skipped
from mcp_approval.checks.run import CheckRun, Opened
from mcp_approval.checks.wire import envelope as request_envelope
from mcp_approval.protocol import (
    DENIALS_EXTENSION,
    DISPOSITION_DENIED_NOT_EXECUTED,
    META_AUTHORIZATION_CONTEXT_ID,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    REMEDIATION_AVAILABLE,
    RESULT_TYPE_TASK,
)

__all__ = [
    "cancel_after_approval",
    "cancelled_never_executes",
    "cancelled_notification_ignored",
    "context_id_not_authorization",
    "expired_never_executes",
    "non_requestable_denial",
    "policy_rechecked",
    "revoked_principal",
]


def _empty_ack(reply_result: dict[str, Any]) -> bool:
    return reply_result.get("resultType") == "complete" and not set(reply_result) - {"resultType", "_meta"}


async def cancelled_never_executes(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """Cancel a pending task, then approve its request out of band: it stays cancelled and never runs."""
    opened = await run.fresh(evidence)
    cancel = await run.cancel(opened)
    evidence.append(f"tasks/cancel: {cancel.brief()}")
    if not cancel.has_result or not _empty_ack(cancel.result):
        raise Failed(f"tasks/cancel of a pending task was not the empty acknowledgement: {cancel.brief()}")
    decided = await run.decide(opened, "approve", retry=False)
    evidence.append(f"approving afterwards: {decided.detail}")
    if decided.not_yet:
        evidence.append("the request was withdrawn: the decider found nothing pending to approve")
    assert opened.task_id is not None
    statuses = await run.watch(run.one, opened.task_id, opened.poll_s)
    runs = (await run.executions(opened.nonce)).count
    evidence.append(f"statuses {statuses}; runs: {runs}")
    if runs:
        raise Failed(f"the cancelled task's tool ran {runs} time(s)")
    if statuses[-1] != "cancelled" or set(statuses) & (TERMINAL - {"cancelled"}):
        raise Failed(f"after tasks/cancel the task reported {statuses}, not cancelled")
    return "cancelled, and the tool never ran"


async def cancelled_notification_ignored(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """``notifications/cancelled`` for the call that created a task does not cancel the task."""
    opened = await run.fresh(evidence)
    assert opened.task_id is not None
    status = await run.one.notify("notifications/cancelled", {"requestId": opened.request_id, "reason": "checked"})
    task = await run.status(run.one, opened.task_id)
    evidence.append(
        f"notifications/cancelled for request {opened.request_id}: HTTP {status}; task {task.get('status')}"
    )
    await run.cancel(opened)
    if task.get("status") not in PENDING:
        raise Failed(f"notifications/cancelled moved the task to {task.get('status')}")
    return "the notification left the task pending"


async def cancel_after_approval(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """Approve, then cancel at once: either the cancel won (cancelled, never ran) or the execution did
    (completed, ran once); never both."""
    opened = await run.fresh(evidence)
    decided = await run.decide(opened, "approve")
    if not decided.ok:
        raise Failed(f"could not approve out of band: {decided.detail}")
    cancel = await run.cancel(opened)
    evidence.append(f"{decided.detail}; then tasks/cancel: {cancel.brief()}")
    task = await run.settled(opened)
    assert opened.task_id is not None
    statuses = await run.watch(run.one, opened.task_id, opened.poll_s)
    runs = (await run.executions(opened.nonce)).count
    evidence.append(f"settled {task.get('status')}, then {statuses}; runs: {runs}")
    ended = statuses[-1]
    if ended == "cancelled" and runs:
        raise Failed(f"the task reports cancelled, and its tool ran {runs} time(s)")
    if ended == "completed" and (runs != 1 or disposition(member(task, "result")) != "approved-executed"):
        raise Failed(
            f"the cancel lost, but the task completed with {runs} run(s), {disposition(task.get('result') or {})}"
        )
    if ended not in ("cancelled", "completed") or len(set(statuses)) > 1:
        raise Failed(f"the task ended {statuses}")
    return "the cancel won; nothing ran" if ended == "cancelled" else "the execution won; the cancel was a no-op"


async def expired_never_executes(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """Let a pending request expire, then approve it: the task completed as a denial and never runs."""
    within = run.options.expires_within_s
    if within is None:
        raise Skipped("--expires-within not given (the server's requests do not expire within a check)")
    opened = await run.fresh(evidence)
    assert opened.task_id is not None
    task = await _terminal_within(run, opened, within + run.options.timeout_s)
    result = member(task, "result")
    evidence.append(
        f"expired: status {task.get('status')}, disposition {disposition(result)}, body {body_text(result)[:120]!r}"
    )
    decided = await run.decide(opened, "approve", retry=False)
    evidence.append(f"approving afterwards: {decided.detail}")
    statuses = await run.watch(run.one, opened.task_id, opened.poll_s)
    runs = (await run.executions(opened.nonce)).count
    evidence.append(f"statuses {statuses}; runs: {runs}")
    if runs:
        raise Failed(f"the expired task's tool ran {runs} time(s)")
    if task.get("status") != "completed" or result.get("isError") is not True:
        raise Failed(f"the expired request ended the task {task.get('status')}, not completed with isError (a denial)")
    if disposition(result) != DISPOSITION_DENIED_NOT_EXECUTED:
        raise Failed(f"the expired task's disposition is {disposition(result)!r}, not denied-not-executed")
    if (problem := denial_body_problem(body_text(result))) is not None:
        raise Failed(problem)
    if statuses != ["completed"]:
        raise Failed(f"the terminal task changed: completed then {statuses}")
    return "the request expired into a denial, and a late approval ran nothing"


async def _terminal_within(run: CheckRun, opened: Opened, seconds: float) -> dict[str, Any]:
    """The task once it is terminal, polled for at most ``seconds``."""
    assert opened.task_id is not None
    deadline = time.monotonic() + seconds
    while (task := await run.status(run.one, opened.task_id)).get("status") not in TERMINAL:
        if time.monotonic() > deadline:
            raise Failed(f"the task is still {task.get('status')} {seconds:g}s after it opened")
        await asyncio.sleep(opened.poll_s)
    return task


async def _approved_under(run: CheckRun, action: PolicyAction, evidence: list[str], notes: list[str]) -> str:
    """Change the policy for a pending call, approve it, and judge: it must not run."""
    if run.options.policy_command is None:
        raise Skipped("--policy-command not given (the kit cannot change the server's policy)")
    opened = await run.fresh(evidence)
    assert opened.task_id is not None
    changed = await change_policy(run.options, action, Call(opened.arguments, opened.nonce, opened.task_id))
    evidence.append(changed.detail)
    if not changed.ok:
        raise Failed(f"the policy command failed: {changed.detail}")
    try:
        decided = await run.decide(opened, "approve")
        evidence.append(decided.detail)
        if not decided.ok:
            raise Failed(f"could not approve out of band: {decided.detail}")
        await _until_terminal_or_settled(run, opened, readable=action == "deny-call")
    finally:
        restored = await change_policy(run.options, "restore")
        evidence.append(restored.detail)
    task = await run.status(run.one, opened.task_id)
    result = member(task, "result")
    runs = (await run.executions(opened.nonce)).count
    evidence.append(f"status {task.get('status')}, disposition {disposition(result)}; runs: {runs}")
    if runs:
        raise Failed(f"the call ran ({runs} time(s)) though the decision at execution was a denial")
    if task.get("status") in PENDING:
        notes.append("the task was kept pending (SEP-2848 allows it while the condition may be transient)")
        await run.cancel(opened)
        return "not executed; the task was kept pending"
    if task.get("status") != "completed" or disposition(result) != DISPOSITION_DENIED_NOT_EXECUTED:
        raise Failed(f"the task ended {task.get('status')} {disposition(result)!r}, not a terminal denial")
    return "not executed: the task completed as a denial"


async def _until_terminal_or_settled(run: CheckRun, opened: Opened, *, readable: bool) -> None:
    """Give the server the settle window to act on the approval (polling, while the principal may read)."""
    assert opened.task_id is not None
    deadline = time.monotonic() + run.options.settle_s
    while time.monotonic() < deadline:
        if readable and (await run.status(run.one, opened.task_id)).get("status") in TERMINAL:
            return
        await asyncio.sleep(max(0.05, min(opened.poll_s, run.options.settle_s / 4)))


async def policy_rechecked(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """Policy changed to deny between approval and execution: the approval does not run the call."""
    return await _approved_under(run, "deny-call", evidence, notes)


async def revoked_principal(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """The principal revoked between approval and execution: the approval does not run the call."""
    return await _approved_under(run, "revoke-principal", evidence, notes)


async def non_requestable_denial(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """A call no approval can lift gets the ordinary denied result: isError, never a task, never a run."""
    if run.options.denied_arguments is None:
        raise Skipped("--denied-arguments not given (no call the policy denies outright)")
    nonce = run.nonce()
    opened = run.register(run.one, run.arguments(nonce, "denied"), nonce)
    reply = await run.call(opened)
    evidence.append(f"tools/call {opened.arguments}: {reply.brief()}")
    await run.check_not_run(opened, "a call the policy denies outright")
    result = reply.result if reply.has_result else {}
    if result.get("resultType") == RESULT_TYPE_TASK:
        if isinstance(result.get("taskId"), str):
            opened.task_id = result["taskId"]
        raise Failed("a denial no approval can lift became a task")
    if reply.is_error:
        notes.append(f"the denial came as a JSON-RPC error ({reply.brief()}), not a CallToolResult with isError")
        return "denied with a JSON-RPC error; no task, nothing ran"
    if result.get("isError") is not True or not body_text(result).strip():
        raise Failed("the denial is not a CallToolResult with isError: true describing it")
    found = envelope(result)
    evidence.append(f"envelope: {json.dumps(found)}")
    if isinstance(found, dict):
        if found.get("remediation") == REMEDIATION_AVAILABLE or found.get("remediationHints"):
            raise Failed(f"the envelope of a denial no approval can lift offers a remedy: {json.dumps(found)}")
    elif DENIALS_EXTENSION in run.extensions:
        notes.append("a SEP-2643 server SHOULD put the envelope on an authorization denial")
    return "an isError denial, no task, nothing ran"


async def context_id_not_authorization(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """An ``authorizationContextId`` is not authority: echoed by another principal it runs nothing, and an
    unknown one does not make a retry fail."""
    handle = _first_context_id(run)
    if handle is None:
        raise Skipped("no envelope of the run carried an authorizationContextId")
    evidence.append(f"authorizationContextId {handle!r}")
    revealing = [value for value in (run.options.tool, run.options.token) if value and value in handle]
    if revealing:
        notes.append(f"the authorizationContextId encodes {revealing}; SEP-2643 says it SHOULD be opaque")
    for wire, echoed, who in ((run.other, handle, "the other principal"), (run.one, "kit-unknown-handle", "the owner")):
        nonce = run.nonce()
        opened = run.register(wire, run.arguments(nonce), nonce)
        meta = request_envelope(tasks=False, elicitation="form", extra={META_AUTHORIZATION_CONTEXT_ID: echoed})
        reply = await wire.request("tools/call", {"name": run.options.tool, "arguments": opened.arguments}, meta=meta)
        evidence.append(f"{who} echoing {echoed!r}: {reply.brief()}")
        await run.check_not_run(opened, f"a call echoing an authorizationContextId ({who})")
        if reply.is_error and reply.error.get("code") != MISSING_REQUIRED_CLIENT_CAPABILITY and who == "the owner":
            raise Failed(f"a retry with an unresolvable authorizationContextId was rejected: {reply.brief()}")
    return "the handle granted nothing, and an unknown one was not rejected"


def _first_context_id(run: CheckRun) -> str | None:
    for exchange in run.transcript.exchanges:
        for document in _documents(exchange.reply.body.get("result")):
            found = envelope(document)
            if isinstance(found, dict) and isinstance(found.get("authorizationContextId"), str):
                return str(found["authorizationContextId"])
    return None


def _documents(result: Any) -> list[dict[str, Any]]:
    if not isinstance(result, dict):
        return []
    inner = result.get("result")
    return [result, *([inner] if isinstance(inner, dict) else [])]
