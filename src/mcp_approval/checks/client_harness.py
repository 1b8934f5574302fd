"""``mcp-approval check-client``: a server with one gated tool that records what a client does.

The harness serves, over Streamable HTTP at ``/mcp``, a ``transfer(to, amount)`` tool whose call
needs approval. A client that declares tasks gets a task that first asks for a justification
(``input_required``, to be answered with ``tasks/update``), then stays ``working`` for two polls,
then completes ``approved-executed``. A client that does not gets the degraded answer:
``isError`` with the ``undisclosed`` envelope and guidance. Every request is recorded; the
client scenarios (:mod:`mcp_approval.checks.client_scenarios`) judge the record.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import rfc8785

from mcp_approval.checks.judge import member
from mcp_approval.protocol import (
    DISPOSITION_APPROVED_EXECUTED,
    HEADER_MCP_NAME,
    INVALID_PARAMS,
    META_AUTHORIZATION,
    META_CLIENT_CAPABILITIES,
    META_TOOL_APPROVAL_DISPOSITION,
    METHOD_ELICITATION_CREATE,
    METHOD_NOT_FOUND,
    PROTOCOL_VERSION_2026,
    REASON_INSUFFICIENT_AUTHORIZATION,
    REMEDIATION_AVAILABLE,
    REMEDIATION_UNDISCLOSED,
    TASKS_EXTENSION,
    TOOL_APPROVAL_EXTENSION,
    UNKNOWN_TASK_MESSAGE,
)

__all__ = ["GATED_TOOL", "INPUT_KEY", "POLL_INTERVAL_MS", "Harness", "Request", "TaskState", "canonical"]

GATED_TOOL = "transfer"
INPUT_KEY = "justification"
#: What the harness asks clients to wait between polls.
POLL_INTERVAL_MS = 300
#: Polls of a ``working`` task before the harness approves it.
WORKING_POLLS = 2
_FORM = {
    "method": METHOD_ELICITATION_CREATE,
    "params": {
        "mode": "form",
        "message": "Why is this transfer needed?",
        "requestedSchema": {
            "type": "object",
            "properties": {INPUT_KEY: {"type": "string"}},
            "required": [INPUT_KEY],
        },
    },
}
_TOOLS = [
    {
        "name": GATED_TOOL,
        "description": "Send money to an account (needs approval).",
        "inputSchema": {
            "type": "object",
            "properties": {"to": {"type": "string"}, "amount": {"type": "number"}},
            "required": ["to", "amount"],
        },
    }
]


def canonical(arguments: Any) -> str:
    """A call's arguments in canonical JSON (RFC 8785): two calls are identical when these are equal
    (key order and number spelling aside: ``{"a": 1.0, "b": 2}`` and ``{"b": 2, "a": 1}`` are one call)."""
    try:
        return rfc8785.dumps(arguments if arguments is not None else {}).decode()
    except (rfc8785.CanonicalizationError, TypeError, ValueError):  # not JSON a canonical form exists for
        return json.dumps(arguments, sort_keys=True, default=str)


@dataclass
class Request:
    """One JSON-RPC request the client sent, as the harness saw it (``at`` it arrived, ``answered`` the
    harness had its answer: a client's wait between polls runs from the one to the next's ``at``)."""

    at: float
    method: str
    params: dict[str, Any]
    mcp_name: str | None
    answered: float = 0.0

    @property
    def declares_tasks(self) -> bool:
        """Whether the request's ``_meta`` declared the tasks extension."""
        capabilities = member(self.params, "_meta").get(META_CLIENT_CAPABILITIES) or {}
        return TASKS_EXTENSION in (capabilities.get("extensions") or {})

    @property
    def task_id(self) -> str | None:
        """The ``taskId`` param of a ``tasks/*`` request."""
        value = self.params.get("taskId")
        return value if isinstance(value, str) else None


@dataclass
class TaskState:
    """A task the harness created: its status, the polls it saw, and whether its result was read."""

    task_id: str
    arguments: dict[str, Any]
    created_at: str
    status: str = "input_required"
    working_polls: int = 0
    executions: int = 0
    result_read: bool = False
    answers: list[dict[str, Any]] = field(default_factory=list)


class Harness:
    """The recorded session: requests, tasks, degraded answers; and the JSON-RPC answers."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self.tasks: dict[str, TaskState] = {}
        #: When each degraded answer was given, and the canonical form of the call it answered.
        self.degraded: list[tuple[float, str]] = []
        #: Set when the client has what it came for (a terminal result read, or a degraded answer).
        self.finished = asyncio.Event()

    def answer(self, method: str, params: dict[str, Any], mcp_name: str | None) -> dict[str, Any]:
        """The JSON-RPC ``result`` or ``error`` member for one request (recorded)."""
        request = Request(time.monotonic(), method, params, mcp_name)
        self.requests.append(request)
        answered = self._answer(method, params)
        request.answered = time.monotonic()
        return answered

    def _answer(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        # 2026-07-28 results name their type; listings also their cache scope and lifetime.
        cached = {"cacheScope": "private", "ttlMs": 0, "resultType": "complete"}
        if method in ("initialize", "server/discover"):
            return {"result": {**self._discover(method, params), **(cached if method != "initialize" else {})}}
        if method == "tools/list":
            return {"result": {"tools": _TOOLS, **cached}}
        if method == "tools/call":
            return {"result": {"resultType": "complete", **self._call(params)}}
        if method in ("tasks/get", "tasks/update", "tasks/cancel"):
            task = self.tasks.get(str(params.get("taskId")))
            if task is None:
                return {"error": {"code": INVALID_PARAMS, "message": UNKNOWN_TASK_MESSAGE}}
            return {"result": {"resultType": "complete", **self._task_method(method, task, params)}}
        if method == "ping":
            return {"result": {"resultType": "complete"}}
        return {"error": {"code": METHOD_NOT_FOUND, "message": f"Method not found: {method}"}}

    def _discover(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        capabilities: dict[str, Any] = {"tools": {}, "extensions": {TASKS_EXTENSION: {}, TOOL_APPROVAL_EXTENSION: {}}}
        info = {"name": "mcp-approval-check-client", "version": "1"}
        if method == "initialize":
            version = params.get("protocolVersion") or PROTOCOL_VERSION_2026
            return {"protocolVersion": version, "capabilities": capabilities, "serverInfo": info}
        return {"capabilities": capabilities, "supportedVersions": [PROTOCOL_VERSION_2026], "serverInfo": info}

    def _call(self, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("name") != GATED_TOOL:
            return {"content": [{"type": "text", "text": f"Unknown tool: {params.get('name')}"}], "isError": True}
        declared = self.requests[-1].declares_tasks
        if not declared:
            self.degraded.append((time.monotonic(), canonical(self.requests[-1].params.get("arguments"))))
            self.finished.set()
            text = (
                f"{GATED_TOOL} did not run: it needs approval, and approval needs a client that declares"
                f" the {TASKS_EXTENSION} extension. Tell the user; do not call it again unchanged."
            )
            envelope = {"reason": REASON_INSUFFICIENT_AUTHORIZATION, "remediation": REMEDIATION_UNDISCLOSED}
            return {
                "content": [{"type": "text", "text": text}],
                "isError": True,
                "_meta": {META_AUTHORIZATION: envelope},
            }
        now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        task = TaskState(secrets.token_urlsafe(24), dict(params.get("arguments") or {}), now)
        self.tasks[task.task_id] = task
        return {"resultType": "task", **self._document(task)}

    def _task_method(self, method: str, task: TaskState, params: dict[str, Any]) -> dict[str, Any]:
        if method == "tasks/update":
            responses = params.get("inputResponses") or {}
            task.answers.append(dict(responses))
            if task.status == "input_required" and INPUT_KEY in responses:
                task.status = "working"
            return {}
        if method == "tasks/cancel":
            if task.status in ("working", "input_required"):
                task.status = "cancelled"
            return {}
        if task.status == "working":
            task.working_polls += 1
            if task.working_polls > WORKING_POLLS:
                task.status, task.executions = "completed", task.executions + 1
        if task.status in ("completed", "cancelled"):
            task.result_read = True
            self.finished.set()
        return self._document(task)

    def _document(self, task: TaskState) -> dict[str, Any]:
        shown: dict[str, Any] = {
            "taskId": task.task_id,
            "status": task.status,
            "createdAt": task.created_at,
            "lastUpdatedAt": task.created_at,
            "ttlMs": 3_600_000,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }
        if task.status == "input_required":
            shown["inputRequests"] = {INPUT_KEY: _FORM}
            shown["statusMessage"] = f"{GATED_TOOL} needs a justification before it is submitted for approval."
        elif task.status == "working":
            shown["statusMessage"] = f"{GATED_TOOL} is waiting for approval; it has not run."
        if task.status in ("input_required", "working"):
            envelope = {
                "reason": REASON_INSUFFICIENT_AUTHORIZATION,
                "remediation": REMEDIATION_AVAILABLE,
                "remediationHints": [{"type": "task"}],
            }
            shown["_meta"] = {META_AUTHORIZATION: envelope}
        if task.status == "completed":
            sent = f"Sent {task.arguments.get('amount')} to {task.arguments.get('to')}."
            text = f"{sent} The call was approved and the tool ran once."
            shown["result"] = {
                "resultType": "complete",
                "content": [{"type": "text", "text": text}],
                "isError": False,
                "_meta": {META_TOOL_APPROVAL_DISPOSITION: DISPOSITION_APPROVED_EXECUTED},
            }
        return shown


def asgi_app(harness: Harness) -> Any:
    """The harness's Starlette application (``POST /mcp``)."""
    from starlette.applications import Starlette
    from starlette.requests import Request as HttpRequest
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    async def mcp(request: HttpRequest) -> Response:
        try:
            body = json.loads(await request.body())
        except json.JSONDecodeError:
            return JSONResponse(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}, 400
            )
        if not isinstance(body, dict) or "method" not in body:
            return Response(status_code=202)
        raw = body.get("params")
        params: dict[str, Any] = raw if isinstance(raw, dict) else {}
        answered = harness.answer(str(body["method"]), params, request.headers.get(HEADER_MCP_NAME))
        if "id" not in body:
            return Response(status_code=202)  # a notification
        status = 400 if "error" in answered else 200
        return JSONResponse({"jsonrpc": "2.0", "id": body["id"], **answered}, status_code=status)

    async def no_stream(request: HttpRequest) -> Response:
        return Response(status_code=405)  # no server-initiated stream: polling carries everything

    return Starlette(routes=[Route("/mcp", mcp, methods=["POST"]), Route("/mcp", no_stream, methods=["GET", "DELETE"])])
