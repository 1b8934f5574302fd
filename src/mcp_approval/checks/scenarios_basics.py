"""Scenarios for the SEP-2663 task basics approval depends on: discovery, declaration, errors, headers."""

from __future__ import annotations

import base64
import json
import secrets
from typing import Any

from mcp_approval.checks.bounded import LimitExceeded
from mcp_approval.checks.judge import PENDING, member
from mcp_approval.checks.report import Failed, Skipped
from mcp_approval.checks.run import CheckRun, Opened
from mcp_approval.checks.wire import LegacySession, MissingMember, Reply, envelope
from mcp_approval.protocol import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    META_CLIENT_CAPABILITIES,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    RESULT_TYPE_TASK,
    TASKS_EXTENSION,
    TOOL_APPROVAL_EXTENSION,
)

__all__ = [
    "LEGACY_MISSING_CAPABILITY",
    "declares_extensions",
    "legacy_connection_inert",
    "mcp_name_checked",
    "missing_capability",
    "pending_task",
    "per_request_declaration",
    "removed_methods",
    "tasks_methods_need_declaration",
    "unknown_task",
]

#: The number SEP-2848's text gives Missing Required Client Capability (a pre-release draft's);
#: MCP 2026-07-28 renumbered it -32021. A server answering it gets a note, not a failure.
LEGACY_MISSING_CAPABILITY = -32003


def missing_capability(reply: Reply, what: str, notes: list[str], *, names_tasks: bool = True) -> str:
    """Judge an answer that must be Missing Required Client Capability naming the tasks extension."""
    if not reply.is_error:
        raise Failed(f"{what}: answered {reply.brief()}, not -32021 (Missing Required Client Capability)")
    code = reply.error.get("code")
    if code == LEGACY_MISSING_CAPABILITY:
        notes.append(
            f"{what}: -32003 is the number SEP-2848's text gives Missing Required Client Capability; MCP"
            " 2026-07-28 allocates -32021 to it (a deviation from the released protocol, not a failure)"
        )
    elif code != MISSING_REQUIRED_CLIENT_CAPABILITY:
        raise Failed(f"{what}: error {code}, not -32021 (Missing Required Client Capability)")
    if names_tasks and TASKS_EXTENSION not in json.dumps(reply.error.get("data"), default=str):
        raise Failed(f"{what}: the error's data does not name {TASKS_EXTENSION}")
    return f"error {code}"


async def declares_extensions(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """``server/discover`` lists the tasks and tool-approval extensions, and no legacy ``tasks`` capability."""
    reply = await run.one.request("server/discover", {})
    evidence.append(f"server/discover: {reply.brief()}")
    if not reply.has_result:
        raise Failed("server/discover did not answer a result")
    capabilities = reply.result.get("capabilities")
    capabilities = capabilities if isinstance(capabilities, dict) else {}
    extensions = member(capabilities, "extensions")
    run.extensions = dict(extensions)
    evidence.append(f"extensions: {sorted(extensions)}")
    missing = [name for name in (TASKS_EXTENSION, TOOL_APPROVAL_EXTENSION) if name not in extensions]
    if missing:
        raise Failed(f"capabilities.extensions lacks {', '.join(missing)}")
    if "tasks" in capabilities:
        raise Failed("the server also advertises the legacy capabilities.tasks, which the extension replaces")
    return "both extensions declared, and no legacy tasks capability"


async def removed_methods(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """``tasks/result`` and ``tasks/list`` are method-not-found."""
    for method, params in (("tasks/result", {"taskId": secrets.token_urlsafe(24)}), ("tasks/list", {})):
        reply = await run.one.request(method, params)
        evidence.append(f"{method}: {reply.brief()}")
        if not reply.is_error or reply.error.get("code") != METHOD_NOT_FOUND:
            raise Failed(f"{method} answered {reply.brief()}, not -32601 (the method was removed)")
    return "both are -32601"


async def unknown_task(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """``tasks/get`` of an id never issued is -32602 (HTTP 400); ``tasks/update``, ``tasks/cancel`` should be."""
    unknown = secrets.token_urlsafe(24)
    read = await run.one.get(unknown)
    evidence.append(f"tasks/get of an unknown id: {read.brief()}")
    if not read.is_error:
        raise Failed("tasks/get of an unknown task id answered a result")
    if read.error.get("code") == METHOD_NOT_FOUND:
        raise Failed("tasks/get answered -32601 Method not found: the server does not serve tasks/get")
    if read.error.get("code") != INVALID_PARAMS:
        raise Failed(f"tasks/get of an unknown id answered error {read.error.get('code')}, not -32602")
    if read.status != 400:
        raise Failed(f"the -32602 came with HTTP {read.status}, not 400")
    for method, reply in (
        ("tasks/update", await run.one.update(unknown, {})),
        ("tasks/cancel", await run.one.cancel(unknown)),
    ):
        evidence.append(f"{method} of an unknown id: {reply.brief()}")
        if not reply.is_error or reply.error.get("code") != INVALID_PARAMS:
            notes.append(f"{method} of an unknown id answered {reply.brief()}; SEP-2663 says it SHOULD be -32602")
    return "tasks/get: -32602 with HTTP 400"


async def pending_task(run: CheckRun, evidence: list[str]) -> Opened:
    """The run's first pending task while it lasts, else a fresh one."""
    pending = run.pending
    if pending is not None and pending.task_id is not None:
        task = await run.status(pending.wire, pending.task_id)
        if task.get("status") in PENDING:
            evidence.append(f"the pending task {pending.task_id}")
            return pending
    return await run.fresh(evidence)


async def tasks_methods_need_declaration(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """``tasks/get``, ``tasks/update`` and ``tasks/cancel`` of a real task without declaring tasks: -32021."""
    opened = await pending_task(run, evidence)
    assert opened.task_id is not None
    for method, params in (
        ("tasks/get", {"taskId": opened.task_id}),
        ("tasks/update", {"taskId": opened.task_id, "inputResponses": {}}),
        ("tasks/cancel", {"taskId": opened.task_id}),
    ):
        reply = await run.one.request(method, params, tasks=False)
        evidence.append(f"{method} without declaring tasks: {reply.brief()}")
        missing_capability(reply, method, notes, names_tasks=False)
        if reply.status != 400:
            raise Failed(f"{method}: the -32021 came with HTTP {reply.status}, not 400")
    status = (await run.status(run.one, opened.task_id)).get("status")
    evidence.append(f"then, declaring tasks: status {status}")
    if status not in PENDING:
        raise Failed(f"the undeclared requests changed the task: it is {status}")
    return "each answered Missing Required Client Capability with HTTP 400; the task is untouched"


async def mcp_name_checked(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """A wrong or missing ``Mcp-Name`` on ``tasks/get`` is -32020 (HTTP 400); the base64 form is served."""
    opened = await pending_task(run, evidence)
    assert opened.task_id is not None
    sentinel = "=?base64?" + base64.b64encode(opened.task_id.encode()).decode() + "?="
    for what, name in (("a wrong Mcp-Name", "not-" + opened.task_id[:8]), ("no Mcp-Name", "")):
        reply = await run.one.get(opened.task_id, headers={"mcp-name": name})
        evidence.append(f"tasks/get with {what}: {reply.brief()}")
        if not reply.is_error or reply.error.get("code") != HEADER_MISMATCH or reply.status != 400:
            raise Failed(f"tasks/get with {what} answered {reply.brief()}, not -32020 with HTTP 400")
    encoded = await run.one.get(opened.task_id, headers={"mcp-name": sentinel})
    evidence.append(f"tasks/get with Mcp-Name {sentinel}: {encoded.brief()}")
    if not encoded.has_result or encoded.result.get("taskId") != opened.task_id:
        raise Failed(f"the base64 form of the task id in Mcp-Name was refused: {encoded.brief()}")
    return "wrong and missing names refused with -32020, the base64 form served"


async def per_request_declaration(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """Only this request's declaration counts: a legacy ``tasks`` capability or ``params.task`` gets no task."""
    nonce = run.nonce()
    opened = run.register(run.one, run.arguments(nonce), nonce)
    meta = envelope(tasks=False, elicitation="form")
    meta[META_CLIENT_CAPABILITIES]["tasks"] = {"requests": {"tools": {"call": {}}}}
    reply = await opened.wire.request(
        "tools/call", {"name": run.options.tool, "arguments": opened.arguments}, meta=meta
    )
    evidence.append(f"the gated call declaring only the legacy tasks capability: {reply.brief()}")
    await run.check_not_run(opened, "a call declaring only the legacy tasks capability")
    if reply.has_result and reply.result.get("resultType") == RESULT_TYPE_TASK:
        raise Failed("a client declaring only the legacy tasks capability got a task")
    witness = run.options.witness_tool
    if witness is None:
        return "the legacy capability got no task (params.task not tried: no witness tool to call)"
    plain = await run.one.call(witness, {}, tasks=False, extra={"task": {"ttl": 60000}})
    evidence.append(f"{witness} with a legacy params.task, not declaring tasks: {plain.brief()}")
    if not plain.has_result or plain.result.get("resultType") == RESULT_TYPE_TASK:
        raise Failed(f"a legacy params.task was not ignored: {plain.brief()}")
    return "no task for the legacy capability; params.task ignored"


async def legacy_connection_inert(run: CheckRun, evidence: list[str], notes: list[str]) -> str:
    """On a 2025-11-25 connection the extension is inert: declaring it there gets no task."""
    capabilities: dict[str, Any] = {"extensions": {TASKS_EXTENSION: {}}}
    try:
        legacy = await LegacySession.open(
            run.one.http, run.options.token, capabilities, url=run.one.url, deadline_s=run.options.timeout_s
        )
    except (MissingMember, LimitExceeded) as exc:
        raise Skipped(f"the server does not speak 2025-11-25 ({str(exc)[:160]})") from None
    nonce = run.nonce()
    opened = run.register(run.one, run.arguments(nonce), nonce)
    message = await legacy.call(run.options.tool, opened.arguments)
    result = member(message, "result")
    evidence.append(f"tools/call on a 2025-11-25 connection declaring tasks: {json.dumps(message)[:200]}")
    await run.check_not_run(opened, "a call on a 2025-11-25 connection")
    if result.get("resultType") == RESULT_TYPE_TASK or "taskId" in result:
        raise Failed("a 2025-11-25 connection got a task: the extension must be inert there")
    return "no task on the legacy connection, and the tool did not run"
