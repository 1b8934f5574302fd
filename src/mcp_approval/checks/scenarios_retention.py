"""The retention scenario: ``createdAt`` plus ``ttlMs`` covers a pending task and a terminal result."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta
from typing import Any

from mcp_approval.checks.judge import PENDING
from mcp_approval.checks.report import Failed
from mcp_approval.checks.run import CheckRun
from mcp_approval.checks.scenarios_basics import pending_task

__all__ = ["retention"]

#: How long after its ``ttlMs`` the kit reads a short-lived pending task again.
_PAST_TTL_S = 1.0


def _moment(value: Any, what: str) -> datetime:
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        raise Failed(f"{what} is not an ISO 8601 time: {str(value)[:60]!r}") from None


def _covers(task: dict[str, Any], what: str) -> None:
    """``createdAt + ttlMs`` is later than ``lastUpdatedAt`` (both the server's clock): the task is covered."""
    ttl_ms = task.get("ttlMs")
    if ttl_ms is None:
        return  # unlimited retention covers everything
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms <= 0:
        raise Failed(f"{what}: ttlMs is {ttl_ms!r}, not a positive integer or null")
    created = _moment(task.get("createdAt"), f"{what}: createdAt")
    updated = _moment(task.get("lastUpdatedAt", task.get("createdAt")), f"{what}: lastUpdatedAt")
    if created + timedelta(milliseconds=ttl_ms) <= updated:
        raise Failed(f"{what}: createdAt + ttlMs ({ttl_ms} ms) does not reach lastUpdatedAt {updated.isoformat()}")


async def retention(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """A task keeps its ``createdAt``, stays readable while pending even past a short ``ttlMs`` (which must
    then have grown to cover its deadline), and a terminal task's ``ttlMs`` covers its result."""
    opened = await pending_task(run, evidence)
    assert opened.task_id is not None
    created = opened.created
    evidence.append(f"CreateTaskResult createdAt={created.get('createdAt')} ttlMs={created.get('ttlMs')}")
    if "ttlMs" not in created:
        raise Failed("the CreateTaskResult has no ttlMs (it is present even when null)")
    _covers(created, "the CreateTaskResult")
    task = await run.status(run.one, opened.task_id)
    if task.get("createdAt") != created.get("createdAt"):
        raise Failed("tasks/get reports another createdAt than the CreateTaskResult")
    ttl_ms = created.get("ttlMs")
    if isinstance(ttl_ms, int) and ttl_ms / 1000 + _PAST_TTL_S < run.options.timeout_s:
        task = await _past_ttl(run, opened.task_id, ttl_ms, evidence)
    _covers(task, f"the {task.get('status')} task")
    for what, finished in (("the approved task", run.approved_task), ("the denied task", run.denied_task)):
        if finished:
            _covers(finished, what)
            evidence.append(f"{what}: createdAt={finished.get('createdAt')} ttlMs={finished.get('ttlMs')}")
    return f"createdAt stable; ttlMs {ttl_ms} covers the pending task and the terminal results"


async def _past_ttl(run: CheckRun, task_id: str, ttl_ms: int, evidence: list[str]) -> dict[str, Any]:
    """Watch a pending task until its first ``ttlMs`` has passed: while it is pending its ``ttlMs`` must
    keep ahead of its age, and it must not disappear before its request's deadline."""
    received = time.monotonic()
    task: dict[str, Any] = {}
    while (age := time.monotonic() - received) < ttl_ms / 1000 + _PAST_TTL_S:
        reply = await run.one.get(task_id)
        if not reply.has_result:
            evidence.append(f"tasks/get {age:.1f}s after creation: {reply.brief()}")
            if run.options.expires_within_s is None and task.get("status") in PENDING:
                raise Failed(f"the pending task was deleted after {age:.1f}s, before its request's deadline")
            return task
        task = reply.result
        shown = task.get("ttlMs")
        if task.get("status") not in PENDING:
            return task
        if isinstance(shown, int) and not isinstance(shown, bool) and shown / 1000 < age:
            raise Failed(f"the task is still pending {age:.1f}s after creation, past its ttlMs of {shown} ms")
        await asyncio.sleep(0.25)
    evidence.append(
        f"tasks/get {ttl_ms / 1000 + _PAST_TTL_S:.1f}s after creation: {task.get('status')}, ttlMs {task.get('ttlMs')}"
    )
    return task
