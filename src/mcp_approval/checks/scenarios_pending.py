"""Scenarios on a call while its approval is pending: no tasks, the task, its text, envelope, owner, input."""

from __future__ import annotations

import json
import re
from typing import Any

from mcp_approval.checks.judge import PENDING, body_text, envelope, member, model_texts
from mcp_approval.checks.report import Failed, Skipped
from mcp_approval.checks.run import CheckRun
from mcp_approval.checks.scenarios_basics import missing_capability, pending_task
from mcp_approval.protocol import (
    DENIALS_EXTENSION,
    HINT_TASK,
    INVALID_PARAMS,
    REASON_INSUFFICIENT_AUTHORIZATION,
    REMEDIATION_AVAILABLE,
    REMEDIATION_UNAVAILABLE,
    REMEDIATION_UNDISCLOSED,
    RESULT_TYPE_TASK,
)

__all__ = [
    "dedup_scope",
    "envelope_while_pending",
    "input_channel",
    "model_text_sanitized",
    "mrtr_retry_bound",
    "no_tasks_client",
    "returns_task_without_executing",
    "task_bound_to_principal",
]

#: What the sanitizing scenario puts in the call: right-to-left override, a colour and a title escape.
HOSTILE = "\u202e\x1b[31m\x1b]0;owned\x07"
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


async def no_tasks_client(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """Without tasks declared: -32021 naming tasks, or ``isError`` guidance; never a task, never a run."""
    nonce = run.nonce()
    opened = run.register(run.one, run.arguments(nonce), nonce)
    reply = await run.call(opened, tasks=False)
    evidence.append(f"tools/call without tasks: {reply.brief()}")
    runs = (await run.executions(nonce)).count
    evidence.append(f"runs the witness shows: {runs}")
    if runs:
        run.stop_unapproved(opened, runs, "a call from a client that did not declare tasks")
    if reply.is_error:
        detail = missing_capability(reply, "tools/call without tasks", notes)
        notes.append("SEP-2848 says a server SHOULD prefer the degraded CallToolResult with next-step guidance")
        return f"{detail} naming the tasks extension"
    result = reply.result if reply.has_result else {}
    if result.get("resultType") == RESULT_TYPE_TASK:
        raise Failed("a task was returned to a client that did not declare tasks")
    if result.get("isError") is not True or not body_text(result).strip():
        raise Failed("neither -32021 nor a CallToolResult with isError: true and guidance in its content")
    found = envelope(result)
    if isinstance(found, dict):
        evidence.append(f"envelope: {json.dumps(found)}")
        if found.get("remediation") == REMEDIATION_UNAVAILABLE:
            raise Failed("the envelope says unavailable, but a remedy exists (a client with tasks gets one)")
        if found.get("remediation") == REMEDIATION_UNDISCLOSED and found.get("remediationHints"):
            raise Failed("an undisclosed envelope carries remediationHints")
    elif DENIALS_EXTENSION in run.extensions:
        notes.append("a SEP-2643 server SHOULD put the envelope (undisclosed) on this denial")
    return "a degraded CallToolResult with isError: true and guidance"


async def returns_task_without_executing(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """The gated call returns a ``working`` task, readable at once, with a statusMessage; nothing ran."""
    opened = await run.fresh(evidence)
    run.pending = opened
    created = opened.created
    message = created.get("statusMessage")
    evidence.append(f"CreateTaskResult status {created.get('status')}: {str(message)[:120]!r}")
    first = opened.first_read
    evidence.append(f"tasks/get at once: {first.brief() if first is not None else 'not read'}")
    if first is None or not first.has_result:
        raise Failed("tasks/get right after the CreateTaskResult did not find the task")
    if created.get("status") not in PENDING:
        raise Failed(f"the task was created {created.get('status')}, not working")
    assert opened.task_id is not None
    task = await run.status(run.one, opened.task_id)
    if task.get("status") not in PENDING:
        raise Failed(f"the task is already {task.get('status')} with no decision made")
    if not isinstance(message, str) or not message.strip():
        raise Failed("the CreateTaskResult carries no human-readable statusMessage")
    return f"task {opened.task_id} {task.get('status')}, readable at once; the tool did not run"


async def model_text_sanitized(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """Control and bidi characters in a call's arguments never reach ``statusMessage`` or the model text."""
    nonce = run.nonce() + HOSTILE
    opened = run.register(run.one, run.arguments(nonce), nonce)
    reply = await run.call(opened)
    evidence.append(f"tools/call with {HOSTILE!r} in the arguments: {reply.brief()}")
    await run.check_not_run(opened, "a call with control characters in its arguments")
    created = reply.result if reply.has_result else {}
    if created.get("resultType") != RESULT_TYPE_TASK or not isinstance(created.get("taskId"), str):
        return "the server made no task of the call (nothing pending to describe)"
    opened.task_id, opened.created = created["taskId"], created
    task = await run.status(run.one, opened.task_id)
    await run.cancel(opened)
    for where, document in (("the CreateTaskResult", created), ("tasks/get", task)):
        for text in model_texts(document):
            if _CONTROLS.search(text):
                raise Failed(f"{where} carries the arguments' control characters unsanitized: {text[:160]!r}")
    return "no control or bidi character of the arguments reached the model-facing text"


async def envelope_while_pending(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """The CreateTaskResult and ``tasks/get`` carry ``insufficient_authorization``/``available``/a task hint."""
    if DENIALS_EXTENSION not in run.extensions:
        raise Skipped(f"the server does not declare {DENIALS_EXTENSION}")
    opened = await pending_task(run, evidence)
    assert opened.task_id is not None
    task = await run.status(run.one, opened.task_id)
    for placement, document in (("the CreateTaskResult", opened.created), ("tasks/get", task)):
        found = envelope(document)
        evidence.append(f"{placement}: envelope {json.dumps(found)}")
        if not isinstance(found, dict):
            raise Failed(f"{placement} of a pending approval task carries no envelope")
        hints = [hint.get("type") for hint in found.get("remediationHints") or [] if isinstance(hint, dict)]
        wanted = (REASON_INSUFFICIENT_AUTHORIZATION, REMEDIATION_AVAILABLE)
        if (found.get("reason"), found.get("remediation")) != wanted or HINT_TASK not in hints:
            raise Failed(f"the envelope of {placement} is not {wanted} with a {HINT_TASK!r} hint")
    return "the envelope is on the CreateTaskResult and repeated on tasks/get"


async def task_bound_to_principal(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """The other principal's ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` of a pending task are refused."""
    opened = await pending_task(run, evidence)
    assert opened.task_id is not None
    await refused_to_other(run, opened.task_id, evidence, notes)
    status = (await run.status(run.one, opened.task_id)).get("status")
    evidence.append(f"tasks/get as the owner: status {status}")
    if status not in PENDING:
        raise Failed(f"the other principal's requests changed the task: it is {status}")
    return "another principal can neither read, answer nor cancel the task"


async def refused_to_other(run: CheckRun, task_id: str, evidence: list[str], notes: list[str]) -> None:
    """Each of the other principal's task requests is an error (as for an unknown task, ideally)."""
    for method, reply in (
        ("tasks/get", await run.other.get(task_id)),
        ("tasks/update", await run.other.update(task_id, {"kit-key": {"action": "accept", "content": {}}})),
        ("tasks/cancel", await run.other.cancel(task_id)),
    ):
        evidence.append(f"{method} as the other principal: {reply.brief()}")
        if not reply.is_error:
            raise Failed(f"the other principal's {method} of the task was accepted")
        if reply.error.get("code") != INVALID_PARAMS:
            notes.append(
                f"{method} as the other principal: {reply.error.get('code')}, not -32602 as for an unknown task"
            )


async def dedup_scope(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """While a task is pending, the other principal's identical call gets a task of its own; the owner's
    identical call should get the same task back (SEP-2848's dedup scope includes the principal)."""
    opened = await run.fresh(evidence)
    assert opened.task_id is not None
    theirs = await run.open(run.other, opened.arguments, opened.nonce)
    evidence.append(f"the other principal's identical call -> task {theirs.task_id}")
    again = await run.open(run.one, opened.arguments, opened.nonce)
    evidence.append(f"the owner's identical call -> task {again.task_id}")
    await run.check_not_run(opened, "identical calls while the first was pending")
    if theirs.task_id == opened.task_id:
        raise Failed("another principal's identical call joined the first principal's task")
    if again.task_id != opened.task_id:
        notes.append("the owner's identical call opened a second task; SEP-2848 says it SHOULD return the existing one")
    return "the other principal got a task of its own" + (
        "; the owner's retry got the same task" if again.task_id == opened.task_id else ""
    )


async def input_channel(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """Submission input is asked through ``input_required`` (before the task, or in it) and answered; then working."""
    opened = await run.fresh(evidence)
    evidence.append(f"input rounds: {opened.input_rounds or 'none'}")
    if not opened.input_rounds:
        if run.options.expects_input:
            raise Failed("the call needs submission input, but no input_required round asked for it")
        raise Skipped("the gated call asked for no submission input (--expects-input not given)")
    for result in opened.mrtr_results:
        if "taskId" in result:
            raise Failed("an input_required round on tools/call carries a taskId (rounds come before the task)")
    for ack in opened.update_acks:
        if (
            not ack.has_result
            or set(ack.result) - {"resultType", "_meta"}
            or ack.result.get("resultType") != "complete"
        ):
            raise Failed(f"tasks/update was not acknowledged with an empty result: {ack.text[:160]}")
    keys = [key for task in opened.task_inputs for key in member(task, "inputRequests")]
    if len(keys) != len(set(keys)):
        raise Failed(f"the task asked again under a key already answered: {keys}")
    if opened.partial is not None:
        listed = sorted(member(opened.partial, "inputRequests"))
        evidence.append(f"after a partial answer: {opened.partial.get('status')}, still asking {listed}")
        if opened.partial.get("status") != "input_required":
            raise Failed(f"after a partial answer the task is {opened.partial.get('status')}, not input_required")
    assert opened.task_id is not None
    task = await run.status(run.one, opened.task_id)
    evidence.append(f"after answering: status {task.get('status')}")
    if task.get("status") != "working":
        raise Failed(f"after its input was answered the task is {task.get('status')}, not working")
    if "during" in opened.input_rounds:
        await _unknown_key_ignored(run, opened.task_id, evidence, notes)
    await run.cancel(opened)
    where = " and ".join(
        {"before": "an input_required round", "during": "tasks/update"}[r] for r in opened.input_rounds
    )
    return f"input answered through {where}; the task is working"


async def _unknown_key_ignored(run: CheckRun, task_id: str, evidence: list[str], notes: list[str]) -> None:
    reply = await run.one.update(task_id, {"kit-never-asked": {"action": "accept", "content": {}}})
    status = (await run.status(run.one, task_id)).get("status")
    evidence.append(f"tasks/update with a key never asked: {reply.brief()}; status {status}")
    if reply.is_error:
        notes.append("an answer to a key never asked was refused; SEP-2663 says it SHOULD be ignored")
    if status != "working":
        raise Failed(f"an answer to a key never asked moved the task to {status}")


async def mrtr_retry_bound(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """A retry echoing ``requestState`` with changed arguments, or from another principal, is rejected."""
    nonce = run.nonce()
    opened = run.register(run.one, run.arguments(nonce), nonce)
    first = await run.one.call(run.options.tool, opened.arguments)
    result = first.result if first.has_result else {}
    if result.get("resultType") != "input_required" or "requestState" not in result:
        if result.get("resultType") == RESULT_TYPE_TASK:
            opened.task_id = str(result.get("taskId"))
        raise Skipped("the gated call has no input_required round with requestState before its task")
    answers = run.answers(result.get("inputRequests"))
    retry = {"inputResponses": answers, "requestState": result["requestState"]}
    changed = run.register(run.one, run.arguments(nonce, "changed"), nonce)
    stolen = run.register(run.other, opened.arguments, nonce)
    for what, attempt in (("changed arguments", changed), ("the other principal", stolen)):
        reply = await attempt.wire.call(run.options.tool, attempt.arguments, extra=retry)
        evidence.append(f"retry with the first call's requestState and {what}: {reply.brief()}")
        answered: dict[str, Any] = reply.result if reply.has_result else {}
        if answered.get("resultType") == RESULT_TYPE_TASK:
            attempt.task_id = str(answered.get("taskId"))
            raise Failed(f"a retry with {what} was accepted as the call the requestState binds")
        if reply.has_result and answered.get("isError") is not True and answered.get("resultType") != "input_required":
            raise Failed(f"a retry with {what} was answered as if it were the bound call")
    await run.check_not_run(opened, "retries of another call's input round")
    return "retries with changed arguments or another principal were rejected"
