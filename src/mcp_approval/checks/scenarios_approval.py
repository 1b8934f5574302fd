"""Scenarios for the SEP-2848 conformance statements (and the SEP-2643 envelope while pending)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

from mcp_approval.checks.outside import decide
from mcp_approval.checks.report import Failed, Skipped
from mcp_approval.checks.scenarios_tasks import pending_task
from mcp_approval.checks.session import TERMINAL, Opened, Session, body_text
from mcp_approval.checks.wire import Wire
from mcp_approval.protocol import (
    DENIALS_EXTENSION,
    DISPOSITION_APPROVED_EXECUTED,
    DISPOSITION_DENIED_NOT_EXECUTED,
    HINT_TASK,
    META_AUTHORIZATION,
    META_TOOL_APPROVAL_DISPOSITION,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    REASON_INSUFFICIENT_AUTHORIZATION,
    REMEDIATION_AVAILABLE,
    REMEDIATION_UNAVAILABLE,
    RESULT_TYPE_TASK,
    TASKS_EXTENSION,
)

__all__ = [
    "approved_call",
    "at_most_once",
    "cancelled_never_executes",
    "changed_envelope",
    "envelope_while_pending",
    "expired_never_executes",
    "input_channel",
    "no_backend_artifacts",
    "no_tasks_client",
    "returns_task_without_executing",
    "terminal_denial_body",
]

#: How a body states that the tool did not run ("did not run", "was not executed", "never ran", ...).
NOT_RUN = re.compile(
    r"\b(did not|didn't|does not|doesn't|was not|wasn't|has not|hasn't|will not|won't|never|not)\b"
    r"[^.]{0,40}?\b(run|ran|execut\w*|perform\w*|carried out)",
    re.IGNORECASE,
)
#: Names of backend binding material (the ARAP binding's) that must never cross the wire.
ARTIFACT_NAMES = ("binding_token", "evaluation_id")


async def no_tasks_client(session: Session, evidence: list[str]) -> str:
    """Without tasks declared: -32021 naming tasks, or ``isError`` guidance; never a task, never a run."""
    nonce = session.nonce()
    answer = await session.call(session.one, session.arguments(nonce), tasks=False)
    evidence.append(f"tools/call without tasks: {answer.brief()}")
    runs = await session.executions(nonce)
    evidence.append(f"runs the witness shows: {runs}")
    if runs:
        raise Failed("the tool ran for a client that did not declare tasks, without approval")
    if answer.error is not None:
        if answer.error.get("code") != MISSING_REQUIRED_CLIENT_CAPABILITY:
            raise Failed(f"error {answer.error.get('code')}, not {MISSING_REQUIRED_CLIENT_CAPABILITY}")
        if TASKS_EXTENSION not in json.dumps(answer.error.get("data")):
            raise Failed(f"the -32021 error does not name {TASKS_EXTENSION} in its data")
        return f"-32021 naming {TASKS_EXTENSION}"
    result = answer.result or {}
    if result.get("resultType") == RESULT_TYPE_TASK:
        raise Failed("a task was returned to a client that did not declare tasks")
    if result.get("isError") is not True or not body_text(result).strip():
        raise Failed("neither -32021 nor a CallToolResult with isError: true and guidance in its content")
    return "a degraded CallToolResult with isError: true and guidance"


async def returns_task_without_executing(session: Session, evidence: list[str]) -> str:
    """The gated call returns a non-terminal task and the witness shows no execution."""
    opened = await pending_task(session, evidence, precondition=False)
    created = opened.created
    evidence.append(f"CreateTaskResult status {created.get('status')}: {str(created.get('statusMessage'))[:120]!r}")
    runs = await session.executions(opened.nonce)
    task = await session.status(session.one, opened.task_id)
    evidence.append(f"tasks/get: status {task.get('status')}; runs the witness shows: {runs}")
    session.pending = opened
    if runs:
        raise Failed(f"the tool ran {runs} time(s) before any approval")
    if created.get("status") not in ("working", "input_required"):
        raise Failed(f"the task was created {created.get('status')}, not working")
    if task.get("status") in TERMINAL:
        raise Failed(f"the task is already {task.get('status')} with no decision made")
    return f"task {opened.task_id} {task.get('status')}, the tool did not run"


async def envelope_while_pending(session: Session, evidence: list[str]) -> str:
    """``tasks/get`` of a pending task carries ``insufficient_authorization``/``available``/a task hint."""
    if DENIALS_EXTENSION not in session.extensions:
        raise Skipped(f"the server does not declare {DENIALS_EXTENSION}")
    opened = session.pending or await pending_task(session, evidence)
    task = await session.status(session.one, opened.task_id)
    if task.get("status") in TERMINAL:
        raise Skipped(f"the task is already {task.get('status')}")
    for placement, document in (("the CreateTaskResult", opened.created), ("tasks/get", task)):
        envelope = (document.get("_meta") or {}).get(META_AUTHORIZATION)
        evidence.append(f"{placement}: _meta[{META_AUTHORIZATION}] = {json.dumps(envelope)}")
        if not isinstance(envelope, dict):
            raise Failed(f"{placement} of a pending approval task carries no envelope")
        hints = [hint.get("type") for hint in envelope.get("remediationHints") or [] if isinstance(hint, dict)]
        wanted = (REASON_INSUFFICIENT_AUTHORIZATION, REMEDIATION_AVAILABLE)
        if (envelope.get("reason"), envelope.get("remediation")) != wanted or HINT_TASK not in hints:
            raise Failed(f"the envelope of {placement} is not {wanted} with a {HINT_TASK!r} hint")
    return "the envelope is on the CreateTaskResult and repeated on tasks/get"


async def input_channel(session: Session, evidence: list[str]) -> str:
    """The gated call's submission input is asked through ``input_required`` and answered; then working."""
    opened = await pending_task(session, evidence)
    evidence.append(f"input rounds: {opened.input_rounds or 'none'}")
    if not opened.input_rounds:
        await session.one.cancel(opened.task_id)
        if session.options.expects_input:
            raise Failed("the call needs submission input, but no input_required round asked for it")
        raise Skipped("the gated call asked for no submission input (--expects-input not given)")
    task = await session.status(session.one, opened.task_id)
    evidence.append(f"after answering: status {task.get('status')}")
    await session.one.cancel(opened.task_id)
    if task.get("status") != "working":
        raise Failed(f"after its input was answered the task is {task.get('status')}, not working")
    where = " and ".join(
        {"before": "tools/call input_required", "during": "tasks/update"}[r] for r in opened.input_rounds
    )
    return f"input answered through {where}; the task is working"


async def approved_call(session: Session, evidence: list[str]) -> tuple[Opened, dict[str, Any]]:
    """A gated call approved out of band and settled (the run's first; later callers reuse it)."""
    if session.approved is not None:
        return session.approved, session.approved_task
    opened = await pending_task(session, evidence)
    decided = await decide(session.options, "approve", opened.arguments, opened.nonce, opened.task_id)
    session.backend_ids.update(decided.backend_ids)
    evidence.append(decided.detail)
    if not decided.ok:
        raise Failed(f"could not approve out of band: {decided.detail}")
    task = await session.settled(opened)
    session.approved, session.approved_task = opened, task
    return opened, task


async def at_most_once(session: Session, evidence: list[str]) -> str:
    """Approve; the task completes ``approved-executed``; the witness shows one execution, then still one."""
    opened, task = await approved_call(session, evidence)
    result = task.get("result") or {}
    disposition = (result.get("_meta") or {}).get(META_TOOL_APPROVAL_DISPOSITION)
    runs = await session.executions(opened.nonce)
    evidence.append(f"settled: status {task.get('status')}, disposition {disposition}; runs the witness shows: {runs}")
    statuses = await session.watch(session.one, opened.task_id, opened.poll_s)
    cancel = await session.one.cancel(opened.task_id)
    after = await session.status(session.one, opened.task_id)
    later = await session.executions(opened.nonce)
    evidence.append(f"then: statuses {statuses}, tasks/cancel {cancel.brief()}, status {after.get('status')}")
    evidence.append(f"runs the witness shows {session.options.settle_s:g}s later: {later}")
    if task.get("status") != "completed":
        raise Failed(f"the approved task ended {task.get('status')}, not completed")
    if runs != 1 or later != 1:
        raise Failed(f"the approved tool ran {max(runs, later)} times, not once")
    if disposition != DISPOSITION_APPROVED_EXECUTED:
        raise Failed(f"the result's disposition is {disposition!r}, not {DISPOSITION_APPROVED_EXECUTED!r}")
    if after.get("status") != "completed":
        raise Failed(f"the completed task became {after.get('status')}")
    if META_AUTHORIZATION in (result.get("_meta") or {}):
        raise Failed("the executed result carries the denial envelope (it asserts the tool did not run)")
    return "executed once, approved-executed with no denial envelope, final"


async def terminal_denial_body(session: Session, evidence: list[str]) -> str:
    """Deny; the task completes ``denied-not-executed`` with the body saying so; nothing ran."""
    opened = await pending_task(session, evidence)
    decided = await decide(session.options, "deny", opened.arguments, opened.nonce, opened.task_id)
    session.backend_ids.update(decided.backend_ids)
    evidence.append(decided.detail)
    if not decided.ok:
        raise Failed(f"could not deny out of band: {decided.detail}")
    task = await session.settled(opened)
    result = task.get("result") or {}
    meta = result.get("_meta") or {}
    text = body_text(result)
    runs = await session.executions(opened.nonce)
    evidence.append(
        f"settled: status {task.get('status')}, isError {result.get('isError')}, disposition"
        f" {meta.get(META_TOOL_APPROVAL_DISPOSITION)}; runs the witness shows: {runs}"
    )
    evidence.append(f"body: {text[:200]!r}")
    if runs:
        raise Failed("the denied tool ran")
    if task.get("status") != "completed":
        raise Failed(f"the denied task ended {task.get('status')}, not completed with a result")
    if meta.get(META_TOOL_APPROVAL_DISPOSITION) != DISPOSITION_DENIED_NOT_EXECUTED:
        raise Failed(f"the disposition is {meta.get(META_TOOL_APPROVAL_DISPOSITION)!r}, not denied-not-executed")
    if result.get("isError") is not True:
        raise Failed("the denial's CallToolResult is not isError: true")
    if not NOT_RUN.search(text):
        raise Failed("the body does not state that the tool did not run (only _meta marks the denial)")
    if DENIALS_EXTENSION in session.extensions:
        envelope = meta.get(META_AUTHORIZATION)
        evidence.append(f"envelope: {json.dumps(envelope)}")
        if not isinstance(envelope, dict) or envelope.get("remediation") != REMEDIATION_UNAVAILABLE:
            raise Failed("a SEP-2643 server's terminal denial lacks the envelope with remediation unavailable")
    return "completed, isError, denied-not-executed in _meta and stated in the body"


async def changed_envelope(session: Session, evidence: list[str]) -> str:
    """After an approval, the changed arguments and the other principal each need an approval of their own."""
    opened, _ = await approved_call(session, evidence)
    before = await session.executions(opened.nonce)
    changed = session.arguments(opened.nonce, changed=True)
    attempts = [("changed arguments", session.one, changed), ("the other principal", session.other, opened.arguments)]
    # Both at once: each is watched for the whole settle window.
    await asyncio.gather(*(_not_run_under(session, opened, *attempt, evidence) for attempt in attempts))
    after = await session.executions(opened.nonce)
    evidence.append(f"runs the witness shows: {before} before, {after} after")
    if after != before:
        raise Failed(f"the changed call ran under the earlier approval ({after - before} more runs)")
    return "each changed call became a new pending task; nothing more ran"


async def _not_run_under(
    session: Session, approved: Opened, what: str, wire: Wire, arguments: dict[str, Any], evidence: list[str]
) -> None:
    """Call with ``arguments``: a new pending task (watched, then cancelled) or a denial, never a run."""
    answer = await session.call(wire, arguments)
    result = answer.result or {}
    evidence.append(f"{what} {arguments}: {answer.brief()}")
    task_id = result.get("taskId")
    if result.get("resultType") == RESULT_TYPE_TASK and isinstance(task_id, str):
        if task_id == approved.task_id:
            raise Failed(f"{what}: the server returned the approved call's task")
        if result.get("status") not in ("working", "input_required"):
            raise Failed(f"{what}: the new task is {result.get('status')} without a new approval")
        statuses = await session.watch(wire, task_id, approved.poll_s)
        evidence.append(f"{what}: task {task_id} statuses {statuses}")
        await wire.cancel(task_id)
        if set(statuses) & TERMINAL - {"cancelled"}:
            raise Failed(f"{what}: the task ended {statuses[-1]} without a new approval")
    elif answer.error is None and result.get("isError") is not True:
        raise Failed(f"{what}: the call ran under the earlier approval")


async def approved_afterwards(session: Session, opened: Opened, evidence: list[str]) -> tuple[list[str], int]:
    """Approve an ended task's request out of band, once (a decider finding nothing to approve is expected
    then), and watch: the statuses the task reports and the runs the witness shows."""
    decided = await decide(session.options, "approve", opened.arguments, opened.nonce, opened.task_id, retry=False)
    session.backend_ids.update(decided.backend_ids)
    evidence.append(f"approving afterwards: {decided.detail}")
    statuses = await session.watch(session.one, opened.task_id, opened.poll_s)
    runs = await session.executions(opened.nonce)
    evidence.append(f"statuses {statuses}; runs the witness shows: {runs}")
    return statuses, runs


async def cancelled_never_executes(session: Session, evidence: list[str]) -> str:
    """Cancel a pending task, then approve its request out of band: it stays cancelled and never runs."""
    opened = await pending_task(session, evidence)
    cancel = await session.one.cancel(opened.task_id)
    evidence.append(f"tasks/cancel: {cancel.brief()}")
    if cancel.error is not None:
        raise Failed(f"tasks/cancel of a pending task was refused: {cancel.brief()}")
    statuses, runs = await approved_afterwards(session, opened, evidence)
    if runs:
        raise Failed(f"the cancelled task's tool ran {runs} time(s)")
    if statuses != ["cancelled"]:
        raise Failed(f"after tasks/cancel the task reported {statuses}, not only cancelled")
    return "cancelled, and the tool never ran"


async def expired_never_executes(session: Session, evidence: list[str]) -> str:
    """Let a pending task's request expire, then approve it out of band: the task ended without running."""
    within = session.options.expires_within_s
    if within is None:
        raise Skipped("--expires-within not given (the server's requests do not expire within a check)")
    opened = await pending_task(session, evidence)
    deadline = time.monotonic() + within + session.options.timeout_s
    while (task := await session.status(session.one, opened.task_id)).get("status") not in TERMINAL:
        if time.monotonic() > deadline:
            raise Failed(
                f"the task is still {task.get('status')} {within + session.options.timeout_s:g}s after it opened"
            )
        await asyncio.sleep(opened.poll_s)
    result = task.get("result") or {}
    disposition = (result.get("_meta") or {}).get(META_TOOL_APPROVAL_DISPOSITION)
    evidence.append(
        f"expired: status {task.get('status')}, disposition {disposition}, body {body_text(result)[:120]!r}"
    )
    statuses, runs = await approved_afterwards(session, opened, evidence)
    if runs:
        raise Failed(f"the expired task's tool ran {runs} time(s)")
    if statuses != [task.get("status")]:
        raise Failed(f"the terminal task changed: {task.get('status')} then {statuses}")
    if task.get("status") == "completed" and disposition != DISPOSITION_DENIED_NOT_EXECUTED:
        raise Failed(f"the expired task completed with disposition {disposition!r}, not denied-not-executed")
    return f"the request expired ({task.get('status')}, {disposition}) and the tool never ran"


async def no_backend_artifacts(session: Session, evidence: list[str]) -> str:
    """No answer of the run carried a backend request id, binding material, or an operator-named artifact."""
    wanted = {name: "binding material" for name in ARTIFACT_NAMES}
    wanted.update({item: "backend request id" for item in session.backend_ids})
    wanted.update({item: "operator-named artifact" for item in session.options.backend_artifacts})
    evidence.append(f"scanned {len(session.one.seen)} answers for {len(wanted)} strings")
    if not session.backend_ids:
        evidence.append("the decider named no backend ids (a decider that prints them makes this check stronger)")
    leaked = sorted({f"{kind} {value}" for value, kind in wanted.items() for text in session.one.seen if value in text})
    if leaked:
        raise Failed(f"answers carried {'; '.join(leaked)}")
    return "no backend artifact in any answer"
