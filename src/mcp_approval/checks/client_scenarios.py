"""What ``mcp-approval check-client`` concludes from the record of a client's session."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable
from typing import Any

from mcp_approval.checks.client_harness import (
    GATED_TOOL,
    INPUT_KEY,
    POLL_INTERVAL_MS,
    Harness,
    Request,
    TaskState,
    canonical,
)
from mcp_approval.checks.options import CheckInputError
from mcp_approval.checks.report import CheckResult, Failed, Outcome, Skipped

__all__ = ["CLIENT_SCENARIOS", "judge", "serve_harness"]

#: A poll this much sooner than ``pollIntervalMs`` still honours it (timer and scheduling jitter).
_POLL_SLACK_S = 0.05

Judge = Callable[[Harness, list[str], list[str]], str]


def _first_task(harness: Harness) -> TaskState:
    if not harness.tasks:
        raise Skipped("the client never got a task (it did not declare tasks)")
    return next(iter(harness.tasks.values()))


def _task_requests(harness: Harness, task: TaskState, method: str | None = None) -> list[Request]:
    return [r for r in harness.requests if r.task_id == task.task_id and (method is None or r.method == method)]


def declares_tasks(harness: Harness, evidence: list[str], notes: list[str]) -> str:
    calls = [r for r in harness.requests if r.method == "tools/call" and r.params.get("name") == GATED_TOOL]
    evidence.append(f"{len(calls)} tools/call of {GATED_TOOL}; declaring tasks: {[c.declares_tasks for c in calls]}")
    if not calls[0].declares_tasks:
        raise Skipped("the client did not declare tasks: the degraded answer is checked instead")
    return "the call declared io.modelcontextprotocol/tasks in its _meta"


def polls_its_task(harness: Harness, evidence: list[str], notes: list[str]) -> str:
    task = _first_task(harness)
    gets = _task_requests(harness, task, "tasks/get")
    others = [r.task_id for r in harness.requests if r.method.startswith("tasks/") and r.task_id != task.task_id]
    evidence.append(
        f"task {task.task_id}: {len(gets)} tasks/get; final status {task.status}; result read {task.result_read}"
    )
    if not gets:
        raise Failed("the client never polled the task it was given")
    if others:
        raise Failed(f"the client sent tasks/* requests for ids it was never given: {others[:3]}")
    if not task.result_read:
        raise Failed(f"the client stopped polling before the task ended (it saw {task.status})")
    return "polled the task id until it read the completed result"


def sends_mcp_name(harness: Harness, evidence: list[str], notes: list[str]) -> str:
    task = _first_task(harness)
    sent = _task_requests(harness, task)
    wrong = [(r.method, r.mcp_name) for r in sent if r.mcp_name != task.task_id]
    evidence.append(f"{len(sent)} tasks/* requests; Mcp-Name missing or wrong on {len(wrong)}")
    if wrong:
        raise Failed(f"tasks/* without Mcp-Name: <taskId>: {wrong[:3]}")
    return "every tasks/* request named the task in Mcp-Name"


def honours_poll_interval(harness: Harness, evidence: list[str], notes: list[str]) -> str:
    task = _first_task(harness)
    sent = _task_requests(harness, task)
    # From the moment the harness had answered one poll to the arrival of the next: a loaded
    # harness can only make that longer, never shorter, so the check cannot fail on its account.
    gaps = [
        later.at - earlier.answered
        for earlier, later in itertools.pairwise(sent)
        if earlier.method == "tasks/get" and later.method == "tasks/get"
    ]
    if not gaps:
        raise Skipped("fewer than two consecutive tasks/get")
    shortest = min(gaps)
    evidence.append(f"pollIntervalMs {POLL_INTERVAL_MS}; gaps between polls {[round(g, 3) for g in gaps]} s")
    if shortest < POLL_INTERVAL_MS / 1000 - _POLL_SLACK_S:
        raise Failed(f"polled after {shortest * 1000:.0f} ms where pollIntervalMs asked {POLL_INTERVAL_MS}")
    return f"the shortest gap was {shortest * 1000:.0f} ms"


def answers_through_update(harness: Harness, evidence: list[str], notes: list[str]) -> str:
    task = _first_task(harness)
    evidence.append(f"tasks/update inputResponses: {[sorted(a) for a in task.answers]}")
    keys = [key for answer in task.answers for key in answer]
    if not keys:
        raise Failed(f"the client never answered the {INPUT_KEY!r} input request with tasks/update")
    if set(keys) - {INPUT_KEY}:
        raise Failed(f"the client answered keys that were not outstanding: {sorted(set(keys) - {INPUT_KEY})}")
    if keys.count(INPUT_KEY) > 1:
        raise Failed(f"the client answered {INPUT_KEY!r} {keys.count(INPUT_KEY)} times")
    return "answered the outstanding key once, with tasks/update"


def _gated_calls(harness: Harness) -> list[Request]:
    return [r for r in harness.requests if r.method == "tools/call" and r.params.get("name") == GATED_TOOL]


def never_recreates(harness: Harness, evidence: list[str], notes: list[str]) -> str:
    task = _first_task(harness)
    key = canonical(task.arguments)
    calls = _gated_calls(harness)
    again = [r for r in calls if canonical(r.params.get("arguments")) == key]
    evidence.append(f"tools/call of {GATED_TOOL} with the task's arguments (canonical JSON {key}): {len(again)}")
    changed = [r for r in calls if canonical(r.params.get("arguments")) != key and r.at > again[0].at]
    for resend in changed:
        notes.append(
            f"called {GATED_TOOL} again with changed arguments ({_changes(task.arguments, resend.params)}) after"
            " the pending answer: that is a new call, which needs an approval of its own, not a retry of the task"
        )
    if len(again) > 1:
        raise Failed(f"the client called {GATED_TOOL} again {len(again) - 1} time(s) instead of polling its task")
    return "one call, one task" + (f"; {len(changed)} call(s) with changed arguments (new calls)" if changed else "")


def _changes(first: dict[str, Any], params: dict[str, Any]) -> str:
    arguments = params.get("arguments")
    later: dict[str, Any] = arguments if isinstance(arguments, dict) else {}
    keys = sorted(set(first) | set(later))
    return ", ".join(f"{k}: {first.get(k)!r} -> {later.get(k)!r}" for k in keys if first.get(k) != later.get(k))


def handles_degraded(harness: Harness, evidence: list[str], notes: list[str]) -> str:
    if not harness.degraded:
        raise Skipped("the client declared tasks and never got the degraded answer")
    keys = [key for _, key in harness.degraded]
    evidence.append(f"degraded answers given: {len(keys)}, for {len(set(keys))} distinct call(s)")
    repeated = {key: keys.count(key) for key in keys if keys.count(key) > 1}
    if repeated:
        again = sum(count - 1 for count in repeated.values())
        raise Failed(f"after the degraded (undisclosed) answer the client called again unchanged {again} time(s)")
    if len(set(keys)) > 1:
        notes.append(f"{len(set(keys))} different calls got the degraded answer: each a call of its own, not a retry")
    return "the client took the degraded answer and did not retry it unchanged"


CLIENT_SCENARIOS: tuple[tuple[str, tuple[str, ...], str, Judge], ...] = (
    ("client-declares-tasks", ("sep-2663-per-request-declaration",),
     "The client declares the tasks extension in the _meta of its tools/call.", declares_tasks),
    ("client-polls-its-task", ("sep-2663-client-accepts-either-result", "sep-2848-client-carries-task-id-only"),
     "The client accepts the CreateTaskResult and polls the task id it was given until the result.", polls_its_task),
    ("client-sends-mcp-name", ("sep-2663-client-sends-mcp-name",),
     "The client sends Mcp-Name: <taskId> on tasks/get, tasks/update and tasks/cancel.", sends_mcp_name),
    # SEP-2663 gives the interval (pollIntervalMs) but no client statement to cite.
    ("client-honours-poll-interval", (),
     "The client waits pollIntervalMs between polls.", honours_poll_interval),
    ("client-answers-input-through-update",
     ("sep-2663-client-answers-outstanding-keys-once", "sep-2848-submission-input-channel"),
     "The client answers input_required through tasks/update, each outstanding key once.", answers_through_update),
    ("client-never-recreates-task", ("sep-2848-client-persists-task-ids",),
     "The client never calls the tool again with the same arguments (canonical JSON) for a call it already has a"
     " task for; a call with changed arguments is flagged as the new call it is.", never_recreates),
    ("client-handles-degraded-answer", ("sep-2643-client-undisclosed-not-final",),
     "A client without tasks takes the degraded answer and does not retry the same call (canonical arguments)"
     " unchanged.", handles_degraded),
)  # fmt: skip


def judge(harness: Harness) -> list[CheckResult]:
    """Each client scenario's result, from what the harness recorded."""
    if not any(r.method == "tools/call" and r.params.get("name") == GATED_TOOL for r in harness.requests):
        raise CheckInputError(f"no client called {GATED_TOOL} before the timeout")
    results: list[CheckResult] = []
    for scenario, checks, statement, run in CLIENT_SCENARIOS:
        evidence: list[str] = []
        notes: list[str] = []
        outcome: Outcome
        try:
            detail, outcome = run(harness, evidence, notes), "PASS"
        except Failed as exc:
            detail, outcome = str(exc), "FAIL"
        except Skipped as exc:
            detail, outcome = str(exc), "SKIP"
        results.append(CheckResult(scenario, checks, statement, outcome, detail, evidence, notes))
    return results


async def serve_harness(
    port: int, *, timeout_s: float, grace_s: float, on_ready: Callable[[str], None] | None = None
) -> Harness:
    """Serve the harness on 127.0.0.1 until the client is done (plus ``grace_s``) or ``timeout_s``."""
    import uvicorn

    from mcp_approval.checks.client_harness import asgi_app

    harness = Harness()
    server = uvicorn.Server(uvicorn.Config(asgi_app(harness), host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()
            raise CheckInputError(f"cannot listen on 127.0.0.1:{port}")
        await asyncio.sleep(0.02)
    if on_ready is not None:
        on_ready(f"http://127.0.0.1:{port}/mcp")
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(harness.finished.wait(), timeout_s)
        await asyncio.sleep(grace_s)  # a client that re-creates or retries does it now
    server.should_exit = True
    await serving
    return harness
