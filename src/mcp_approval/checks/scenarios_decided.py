"""Scenarios on a decided call: it runs once and as bound, its body states its outcome, and a decision
covers that call only (not a changed one, not the same one again, not another principal's)."""

from __future__ import annotations

import json
from typing import Any

from mcp_approval.checks.judge import (
    TERMINAL,
    body_text,
    denial_body_problem,
    disposition,
    envelope,
    executed_body_problem,
    member,
    says_not_run,
)
from mcp_approval.checks.report import Failed, Skipped
from mcp_approval.checks.run import CheckRun, Opened
from mcp_approval.checks.scenarios_pending import refused_to_other
from mcp_approval.checks.wire import Wire
from mcp_approval.checks.witness import differences
from mcp_approval.protocol import (
    DENIALS_EXTENSION,
    DISPOSITION_APPROVED_EXECUTED,
    DISPOSITION_DENIED_NOT_EXECUTED,
    DISPOSITION_EXECUTION_ERROR,
    DISPOSITION_OUTCOME_UNKNOWN,
    REMEDIATION_AVAILABLE,
    REMEDIATION_UNAVAILABLE,
    RESULT_TYPE_TASK,
)

__all__ = [
    "approved_call",
    "at_most_once",
    "changed_envelope",
    "denial_is_final",
    "executed_result_states_outcome",
    "execution_error_outcome",
    "finished_task_bound_to_principal",
    "not_a_standing_grant",
    "runs_as_bound",
    "terminal_denial_body",
]


async def approved_call(run: CheckRun, evidence: list[str]) -> tuple[Opened, dict[str, Any]]:
    """A gated call approved out of band and settled (the run's first; later callers reuse it)."""
    if run.approved is not None:
        evidence.append(f"the approved call {run.approved.arguments} (task {run.approved.task_id})")
        return run.approved, run.approved_task
    opened, task = await run.decided(evidence, "approve")
    run.approved, run.approved_task = opened, task
    return opened, task


def _empty_ack(reply_result: dict[str, Any]) -> bool:
    return reply_result.get("resultType") == "complete" and not set(reply_result) - {"resultType", "_meta"}


async def at_most_once(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """Approve: the task completes ``approved-executed``; the witness shows one run, then still one."""
    opened, task = await approved_call(run, evidence)
    assert opened.task_id is not None
    result = member(task, "result")
    runs = (await run.executions(opened.nonce)).count
    evidence.append(f"settled: status {task.get('status')}, disposition {disposition(result)}; runs: {runs}")
    statuses = await run.watch(run.one, opened.task_id, opened.poll_s)
    cancel = await run.one.cancel(opened.task_id)
    after = await run.status(run.one, opened.task_id)
    later = (await run.executions(opened.nonce)).count
    evidence.append(f"then: statuses {statuses}, tasks/cancel {cancel.brief()}, status {after.get('status')}")
    evidence.append(f"runs the witness shows {run.options.settle_s:g}s later: {later}")
    if task.get("status") != "completed":
        raise Failed(f"the approved task ended {task.get('status')}, not completed")
    if runs != 1 or later != 1:
        raise Failed(f"the approved tool ran {max(runs, later)} times, not once")
    if disposition(result) != DISPOSITION_APPROVED_EXECUTED:
        raise Failed(f"the result's disposition is {disposition(result)!r}, not {DISPOSITION_APPROVED_EXECUTED!r}")
    if set(statuses) != {"completed"} or after.get("status") != "completed":
        raise Failed(f"the completed task changed: {[*statuses, after.get('status')]}")
    if not cancel.has_result or not _empty_ack(cancel.result):
        raise Failed(f"tasks/cancel of a completed task was not the empty acknowledgement: {cancel.brief()}")
    return "executed once, approved-executed, and final"


async def runs_as_bound(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """What the witness shows ran is the approved call: the same tool, the same arguments."""
    opened, _ = await approved_call(run, evidence)
    shown = await run.executions(opened.nonce)
    if not shown.records:
        raise Skipped("the witness shows text, not execution records: what ran cannot be compared")
    for record in shown.records:
        evidence.append(f"what ran: {json.dumps(record, default=str)[:240]}")
        found = differences(record, run.options.tool, opened.arguments)
        if found:
            raise Failed(f"the call that ran is not the call that was approved: {'; '.join(found)}")
    return "the tool ran with exactly the approved arguments"


async def executed_result_states_outcome(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """The executed result states that it ran, carries no denial envelope, and shows this call's result."""
    opened, task = await approved_call(run, evidence)
    result = member(task, "result")
    text = body_text(result)
    evidence.append(f"body: {text[:200]!r}")
    if result.get("isError") is not False and result.get("isError") is not None:
        raise Failed("an approved-executed result is isError: true")
    if (problem := executed_body_problem(text)) is not None:
        raise Failed(problem)
    if envelope(result) is not None:
        raise Failed("the executed result carries the denial envelope (it asserts the tool did not run)")
    if isinstance(outer := envelope(task), dict):
        raise Failed(f"the completed task still carries the envelope {json.dumps(outer)} on tasks/get")
    shown = text + json.dumps(result.get("structuredContent"), default=str)
    others = sorted({call.nonce for call in run.calls if call.nonce != opened.nonce and call.nonce in shown})
    if others:
        raise Failed(f"the result shows another call's result (it names {others[0]}, not {opened.nonce})")
    return "the body states the call ran, with no envelope, and is this call's result"


async def finished_task_bound_to_principal(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """After it completed, the other principal can still neither read, answer nor cancel the task."""
    opened, _ = await approved_call(run, evidence)
    assert opened.task_id is not None
    before = (await run.status(run.one, opened.task_id)).get("status")
    await refused_to_other(run, opened.task_id, evidence, notes)
    status = (await run.status(run.one, opened.task_id)).get("status")
    if status != before:
        raise Failed(f"the other principal's requests changed the finished task: {before}, now {status}")
    return f"the {before} task stays its owner's"


async def not_a_standing_grant(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """After an approved call ran, the same call again is evaluated fresh: it does not run on the old approval."""
    opened, _ = await approved_call(run, evidence)
    before = (await run.executions(opened.nonce)).count
    await _not_run_under(run, opened, "the same call again", run.one, opened.arguments, evidence, before)
    return "the same call again needed an approval of its own"


async def changed_envelope(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """After an approval, the changed arguments and the other principal each need an approval of their own."""
    opened, _ = await approved_call(run, evidence)
    before = (await run.executions(opened.nonce)).count
    changed = run.arguments(opened.nonce, "changed")
    await _not_run_under(run, opened, "changed arguments", run.one, changed, evidence, before)
    await _not_run_under(run, opened, "the other principal", run.other, opened.arguments, evidence, before)
    return "each changed call became a new pending task or a denial; nothing more ran"


async def _not_run_under(
    run: CheckRun,
    approved: Opened,
    what: str,
    wire: Wire,
    arguments: dict[str, Any],
    evidence: list[str],
    before: int,
) -> None:
    """Call with ``arguments``: a new pending task (watched, then cancelled) or a denial, never a run."""
    attempt = run.register(wire, arguments, approved.nonce)
    reply = await run.call(attempt)
    result = reply.result if reply.has_result else {}
    evidence.append(f"{what} {arguments}: {reply.brief()}")
    task_id = result.get("taskId")
    if result.get("resultType") == RESULT_TYPE_TASK and isinstance(task_id, str):
        attempt.task_id = task_id
        if task_id == approved.task_id:
            raise Failed(f"{what}: the server returned the approved call's task")
        statuses = await run.watch(wire, task_id, approved.poll_s)
        evidence.append(f"{what}: task {task_id} statuses {statuses}")
        await run.cancel(attempt)
        await run.check_not_run(attempt, what, before=before)
        if set(statuses) & TERMINAL - {"cancelled"}:
            raise Failed(f"{what}: the task ended {statuses[-1]} without a new approval")
        return
    await run.check_not_run(attempt, what, before=before)
    if not reply.is_error and result.get("isError") is not True:
        raise Failed(f"{what}: the call was answered as executed without a new approval")


async def terminal_denial_body(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """Deny: the task completes ``denied-not-executed``, isError, the body saying so; nothing ran."""
    opened, task = await run.decided(evidence, "deny")
    run.denied, run.denied_task = opened, task
    result = member(task, "result")
    text = body_text(result)
    runs = await run.check_not_run(opened, "a denied call")
    evidence.append(
        f"settled: status {task.get('status')}, isError {result.get('isError')}, disposition"
        f" {disposition(result)}; runs: {runs}"
    )
    evidence.append(f"body: {text[:200]!r}")
    if task.get("status") != "completed":
        raise Failed(f"the denied task ended {task.get('status')}, not completed with a result")
    if disposition(result) != DISPOSITION_DENIED_NOT_EXECUTED:
        raise Failed(f"the disposition is {disposition(result)!r}, not denied-not-executed")
    if result.get("isError") is not True:
        raise Failed("the denial's CallToolResult is not isError: true")
    if (problem := denial_body_problem(text)) is not None:
        raise Failed(problem)
    _denial_envelope(run, task, result, evidence)
    return "completed, isError, denied-not-executed, and the body says the tool did not run"


def _denial_envelope(run: CheckRun, task: dict[str, Any], result: dict[str, Any], evidence: list[str]) -> None:
    if DENIALS_EXTENSION not in run.extensions:
        return
    found = envelope(result)
    evidence.append(f"envelope: {json.dumps(found)}")
    if not isinstance(found, dict) or found.get("remediation") != REMEDIATION_UNAVAILABLE:
        raise Failed("a SEP-2643 server's terminal denial lacks the envelope with remediation unavailable")
    if found.get("remediationHints"):
        raise Failed("the unavailable envelope carries remediationHints")
    outer = envelope(task)
    if isinstance(outer, dict) and outer.get("remediation") == REMEDIATION_AVAILABLE:
        raise Failed("the terminal task still carries the available envelope on tasks/get")


async def denial_is_final(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """A late approval of a denied call changes nothing: the task stays denied and nothing runs."""
    opened = run.denied
    if opened is None or opened.task_id is None:
        raise Skipped("terminal-denial-body left no denied task")
    decided = await run.decide(opened, "approve", retry=False)
    evidence.append(f"approving the denied call afterwards: {decided.detail}")
    statuses = await run.watch(run.one, opened.task_id, opened.poll_s)
    task = await run.status(run.one, opened.task_id)
    runs = (await run.executions(opened.nonce)).count
    evidence.append(f"statuses {statuses}; disposition {disposition(task.get('result') or {})}; runs {runs}")
    if runs:
        raise Failed(f"a late approval executed the denied task ({runs} run(s))")
    if set(statuses) != {"completed"} or disposition(member(task, "result")) != DISPOSITION_DENIED_NOT_EXECUTED:
        raise Failed(f"the denied task changed after the late approval: {statuses}")
    return "the denial stayed final and nothing ran"


async def execution_error_outcome(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """An approved call whose tool fails completes isError with ``execution-error``, without the envelope."""
    if run.options.failing_arguments is None:
        raise Skipped("--failing-arguments not given (no approved call that fails when it runs)")
    _, task = await run.decided(evidence, "approve", template="failing")
    result = member(task, "result")
    text = body_text(result)
    evidence.append(f"settled: status {task.get('status')}, disposition {disposition(result)}, body {text[:160]!r}")
    if task.get("status") != "completed":
        raise Failed(f"a failure after the execution claim ended the task {task.get('status')}, not completed")
    if result.get("isError") is not True:
        raise Failed("the failed execution's result is not isError: true")
    if disposition(result) not in (DISPOSITION_EXECUTION_ERROR, DISPOSITION_OUTCOME_UNKNOWN):
        raise Failed(f"the disposition is {disposition(result)!r}, not execution-error (or outcome-unknown)")
    if envelope(result) is not None or envelope(task) is not None:
        raise Failed("the execution error carries the denial envelope (which asserts nothing ran)")
    if says_not_run(text):
        raise Failed(f"the body of an execution error says the tool did not run: {text[:160]!r}")
    return f"completed, isError, {disposition(result)}, no envelope"
