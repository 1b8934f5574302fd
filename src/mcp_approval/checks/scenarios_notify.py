"""The scenario for SEP-2663 ``notifications/tasks``, judged by what the server acknowledged."""

from __future__ import annotations

import json
import secrets

from mcp_approval.checks.judge import member
from mcp_approval.checks.listen import ACKNOWLEDGED, LISTEN_ID, Listening, listening
from mcp_approval.checks.report import Failed, Skipped
from mcp_approval.checks.run import CheckRun
from mcp_approval.checks.scenarios_basics import missing_capability
from mcp_approval.checks.wire import Reply
from mcp_approval.protocol import METHOD_NOT_FOUND

__all__ = ["notifications"]

#: What a status notification must report as ``tasks/get`` does (SEP-2663: the same task view).
_NOTIFIED = ("taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "statusMessage")
_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
_NEVER_ON_TASK_STREAM = ("notifications/progress", "notifications/message")


async def notifications(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """Listen for the task, another principal's and an unknown one: the acknowledgement lists only what
    the server will notify; when it lists the task, its cancellation is notified as ``tasks/get`` reads."""
    timeout_s = run.options.timeout_s
    async with listening(run.one, [secrets.token_urlsafe(24)], timeout_s, tasks=False) as undeclared:
        evidence.append(f"listen for taskIds without declaring tasks: {_first(undeclared)}")
        if undeclared.refusal is not None and undeclared.refusal.get("code") == METHOD_NOT_FOUND:
            raise Skipped("the server does not offer subscriptions/listen (-32601)")
        if undeclared.refusal is None:
            raise Failed("a listen request for taskIds that did not declare tasks was accepted")
        missing_capability(Reply(400, {"error": undeclared.refusal}), "listen for taskIds", notes, names_tasks=False)
    own = await run.fresh(evidence)
    theirs = await run.fresh(evidence, wire=run.other)
    unknown = secrets.token_urlsafe(24)
    assert own.task_id is not None
    assert theirs.task_id is not None
    async with listening(run.one, [own.task_id, theirs.task_id, unknown], timeout_s) as stream:
        if stream.refused is not None:
            raise Skipped(f"the server refused subscriptions/listen ({stream.refused})")
        agreed = stream.acknowledged_ids()
        evidence.append(f"acknowledgement: {_first(stream)}")
        if agreed is None:
            raise Failed(f"the listen stream's first frame is not {ACKNOWLEDGED} (within {timeout_s:g}s)")
        if theirs.task_id in agreed or unknown in agreed:
            raise Failed("the acknowledgement lists a task id the caller may not access (another's, or unknown)")
        if own.task_id not in agreed:
            await run.cancel(own)
            await run.cancel(theirs)
            _frames_are_clean(stream)
            return "the server acknowledged no task id: nothing is notified (polling is the baseline)"
        await run.cancel(own)
        notified = await stream.wait_for(own.task_id, "cancelled", timeout_s)
        await run.cancel(theirs)
        _frames_are_clean(stream)
    task = await run.status(run.one, own.task_id)
    if notified is None:
        raise Failed(f"the acknowledged task's cancellation was not notified within {timeout_s:g}s")
    evidence.append(f"notifications/tasks: {json.dumps(notified)[:200]}")
    differing = [key for key in _NOTIFIED if key in task and notified.get(key) != task.get(key)]
    if differing or "resultType" in notified:
        shown = {key: (notified.get(key), task.get(key)) for key in differing}
        raise Failed(f"the notification is not the task as tasks/get reads it: {shown or 'it has a resultType'}")
    return "only its own task acknowledged; the cancellation notified as tasks/get reads it"


def _first(stream: Listening) -> str:
    return stream.refused or (json.dumps(stream.frames[0])[:200] if stream.frames else "nothing")


def _frames_are_clean(stream: Listening) -> None:
    """Every frame carries the listen request's subscription id; no progress or log on a task stream."""
    for frame in stream.frames:
        if frame.get("method") in _NEVER_ON_TASK_STREAM:
            raise Failed(f"{frame.get('method')} was sent on a task's listen stream")
        params = member(frame, "params")
        meta = member(params, "_meta")
        if "method" in frame and meta.get(_SUBSCRIPTION_ID) != LISTEN_ID:
            raise Failed(f"a {frame.get('method')} frame does not carry subscriptionId {LISTEN_ID!r}")
