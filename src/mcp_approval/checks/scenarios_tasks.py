"""Scenarios for the SEP-2663 task basics approval depends on."""

from __future__ import annotations

import asyncio
import json
import secrets

from mcp_approval.checks.listen import listening
from mcp_approval.checks.report import Failed, Skipped
from mcp_approval.checks.session import TERMINAL, Opened, Session
from mcp_approval.protocol import TASKS_EXTENSION, TOOL_APPROVAL_EXTENSION

__all__ = ["bound_to_principal", "declares_extensions", "notifications", "pending_task", "ttl", "unknown_task"]

#: What a status notification must report as ``tasks/get`` does (SEP-2663: the same task view).
_NOTIFIED = ("taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs")


async def declares_extensions(session: Session, evidence: list[str]) -> str:
    """``server/discover`` lists the tasks and tool-approval extensions."""
    answer = await session.one.request("server/discover", {})
    evidence.append(f"server/discover: {answer.brief()}")
    if answer.result is None:
        raise Failed("server/discover did not answer a result")
    extensions = (answer.result.get("capabilities") or {}).get("extensions") or {}
    session.extensions = dict(extensions)
    evidence.append(f"extensions: {sorted(extensions)}")
    missing = [name for name in (TASKS_EXTENSION, TOOL_APPROVAL_EXTENSION) if name not in extensions]
    if missing:
        raise Failed(f"capabilities.extensions lacks {', '.join(missing)}")
    return "both extensions declared"


async def pending_task(session: Session, evidence: list[str], *, precondition: bool = True) -> Opened:
    """A fresh gated call of the first principal, now a task (its input answered).

    A scenario that builds on a pending task does not apply when the tool already ran: that is
    the requestable-denial scenario's failure, so the others skip rather than fail with it.
    """
    nonce = session.nonce()
    opened = await session.open(session.one, session.arguments(nonce), nonce)
    evidence.append(f"tools/call {session.options.tool} {opened.arguments} -> task {opened.task_id}")
    if precondition and (runs := await session.executions(nonce)):
        await session.one.cancel(opened.task_id)
        raise Skipped(f"the tool ran {runs} time(s) before any decision (see requestable-denial-returns-task)")
    return opened


async def bound_to_principal(session: Session, evidence: list[str]) -> str:
    """The other principal's ``tasks/get`` and ``tasks/cancel`` of the task are refused."""
    opened = await pending_task(session, evidence)
    read = await session.other.get(opened.task_id)
    evidence.append(f"tasks/get as the other principal: {read.brief()}")
    cancel = await session.other.cancel(opened.task_id)
    evidence.append(f"tasks/cancel as the other principal: {cancel.brief()}")
    if read.error is None:
        raise Failed("the other principal read the task")
    if cancel.error is None:
        raise Failed("the other principal's tasks/cancel was accepted")
    status = (await session.status(session.one, opened.task_id)).get("status")
    evidence.append(f"tasks/get as the owner: status {status}")
    if status == "cancelled":
        raise Failed("the other principal's tasks/cancel cancelled the task")
    await session.one.cancel(opened.task_id)  # leave no pending request behind
    return "another principal can neither read nor cancel the task"


async def unknown_task(session: Session, evidence: list[str]) -> str:
    """``tasks/get`` of an id never issued is an error."""
    answer = await session.one.get(secrets.token_urlsafe(24))
    evidence.append(f"tasks/get of an unknown id: {answer.brief()}")
    if answer.error is None:
        raise Failed("tasks/get of an unknown task id answered a result")
    return f"error {answer.error.get('code')}"


async def ttl(session: Session, evidence: list[str]) -> str:
    """The created task and ``tasks/get`` carry ``createdAt`` and a positive ``ttlMs``."""
    opened = await pending_task(session, evidence)
    created = opened.created
    evidence.append(f"CreateTaskResult createdAt={created.get('createdAt')} ttlMs={created.get('ttlMs')}")
    if not isinstance(created.get("createdAt"), str):
        raise Failed("the CreateTaskResult has no createdAt")
    ttl_ms = created.get("ttlMs")
    if ttl_ms is not None and (not isinstance(ttl_ms, (int, float)) or ttl_ms <= 0):
        raise Failed(f"ttlMs is {ttl_ms!r}")
    await asyncio.sleep(opened.poll_s)
    task = await session.status(session.one, opened.task_id)
    evidence.append(
        f"tasks/get createdAt={task.get('createdAt')} ttlMs={task.get('ttlMs')} status={task.get('status')}"
    )
    await session.one.cancel(opened.task_id)
    if task.get("createdAt") != created.get("createdAt"):
        raise Failed("tasks/get reports another createdAt than the CreateTaskResult")
    if task.get("status") in TERMINAL:
        raise Failed(f"a pending approval task is already {task.get('status')}")
    if ttl_ms is None:
        return "createdAt stable; no ttlMs (unlimited retention)"
    return f"createdAt stable, ttlMs {ttl_ms}"


async def notifications(session: Session, evidence: list[str]) -> str:
    """A listen stream for the task notifies its cancellation, as ``tasks/get`` then reports it."""
    opened = await pending_task(session, evidence)
    timeout_s = session.options.timeout_s
    async with listening(session.one, [opened.task_id], timeout_s) as stream:
        if stream.refused is not None:
            await session.one.cancel(opened.task_id)
            raise Skipped(f"the server does not offer subscriptions/listen ({stream.refused})")
        if not stream.frames:
            await session.one.cancel(opened.task_id)
            raise Failed(f"the listen stream sent nothing within {timeout_s:g}s")
        evidence.append(f"subscriptions/listen: first frame {json.dumps(stream.frames[0])[:160]}")
        await session.one.cancel(opened.task_id)
        notified = await stream.wait_for_status(opened.task_id, "cancelled", timeout_s)
        session.one.seen.extend(json.dumps(frame) for frame in stream.frames)  # for the artifact scenario
    task = await session.status(session.one, opened.task_id)
    if notified is None:
        raise Failed(f"no notifications/tasks with status cancelled within {timeout_s:g}s of tasks/cancel")
    evidence.append(f"notifications/tasks: {json.dumps(notified)[:200]}")
    differing = [key for key in _NOTIFIED if key in task and notified.get(key) != task.get(key)]
    if differing:
        shown = {key: (notified.get(key), task.get(key)) for key in differing}
        raise Failed(f"the notification and tasks/get disagree on {shown}")
    return "the cancellation was notified, as tasks/get reports it"
