"""One run against a server: two principals' wires, fresh nonces, and the steps scenarios share."""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from mcp_approval.checks.options import CheckOptions, fill
from mcp_approval.checks.outside import executions
from mcp_approval.checks.report import Failed
from mcp_approval.checks.wire import Answer, Wire
from mcp_approval.protocol import METHOD_ELICITATION_CREATE, RESULT_TYPE_INPUT_REQUIRED, RESULT_TYPE_TASK

__all__ = ["TERMINAL", "Opened", "Session", "body_text"]

TERMINAL = frozenset({"completed", "failed", "cancelled"})
#: The longest the kit waits between two polls, whatever ``pollIntervalMs`` says (a check must end).
_MAX_POLL_S = 1.0
_ANSWER_TEXT = "Checked by mcp-approval check"


@dataclass
class Opened:
    """A gated call that became a task: its id, arguments, nonce, and how input was collected."""

    task_id: str
    arguments: dict[str, Any]
    nonce: str
    created: dict[str, Any]
    #: ``"before"`` (an ``input_required`` round on ``tools/call``), ``"during"`` (``tasks/update``).
    input_rounds: list[str] = field(default_factory=list)
    poll_s: float = 0.5


@dataclass
class Session:
    """The wires of the two principals and everything the run learned along the way."""

    options: CheckOptions
    one: Wire
    other: Wire
    #: Identifiers the decider named: the backend's, never to be seen by the client.
    backend_ids: set[str] = field(default_factory=set)
    extensions: dict[str, Any] = field(default_factory=dict)
    #: A call approved and executed once (shared by the scenarios that need one).
    approved: Opened | None = None
    approved_task: dict[str, Any] = field(default_factory=dict)
    #: The task the requestable-denial scenario left pending (the envelope scenario reads it).
    pending: Opened | None = None

    def nonce(self) -> str:
        """A value no other call of any run shares."""
        return "chk" + secrets.token_hex(6)

    def arguments(self, nonce: str, *, changed: bool = False) -> dict[str, Any]:
        """The gated call's (or its changed variant's) arguments for ``nonce``."""
        template = self.options.changed_arguments if changed else self.options.arguments
        result: dict[str, Any] = fill(template, nonce)
        return result

    async def executions(self, nonce: str) -> int:
        """How many executions of a call with ``nonce`` the witness shows."""
        return await executions(self.options, self.one, nonce)

    async def open(self, wire: Wire, arguments: dict[str, Any], nonce: str) -> Opened:
        """Call the gated tool declaring tasks and answer any input request, until a task exists."""
        rounds: list[str] = []
        answer = await self.call(wire, arguments, rounds=rounds)
        result = _result(answer, "tools/call")
        if result.get("resultType") != RESULT_TYPE_TASK or not isinstance(result.get("taskId"), str):
            raise Failed(f"the gated call did not return a task: {answer.brief()} {_text(result)!r}")
        opened = Opened(result["taskId"], arguments, nonce, result, rounds, _poll_s(result))
        if result.get("status") == "input_required":
            await self.answer_in_task(wire, opened)
        return opened

    async def call(
        self, wire: Wire, arguments: dict[str, Any], *, tasks: bool = True, rounds: list[str] | None = None
    ) -> Answer:
        """``tools/call`` of the gated tool, answering an ``input_required`` round (SEP-2322) if asked."""
        answer = await wire.call(self.options.tool, arguments, tasks=tasks)
        result = answer.result or {}
        if result.get("resultType") == RESULT_TYPE_INPUT_REQUIRED:
            if rounds is not None:
                rounds.append("before")
            responses = self.answers(result.get("inputRequests"))
            extra = {"inputResponses": responses, "requestState": result.get("requestState")}
            answer = await wire.call(self.options.tool, arguments, tasks=tasks, **extra)
        return answer

    async def answer_in_task(self, wire: Wire, opened: Opened) -> None:
        """Answer a task's outstanding ``inputRequests`` through ``tasks/update``."""
        task = _result(await wire.get(opened.task_id), "tasks/get")
        if task.get("status") != "input_required":
            return
        opened.input_rounds.append("during")
        answer = await wire.update(opened.task_id, self.answers(task.get("inputRequests")))
        if answer.error is not None:
            raise Failed(f"tasks/update answering the task's input was refused: {answer.brief()}")
        # The server may submit the request after acknowledging the answers: wait for the task to move on.
        deadline = time.monotonic() + self.options.timeout_s
        while (await self.status(wire, opened.task_id)).get("status") == "input_required":
            if time.monotonic() > deadline:
                raise Failed(f"the task is still input_required {self.options.timeout_s:g}s after tasks/update")
            await asyncio.sleep(opened.poll_s)

    def answers(self, requests: Any) -> dict[str, Any]:
        """An accepting answer to each form request (the operator's content, or a sentence per field)."""
        if not isinstance(requests, dict) or not requests:
            raise Failed(f"input_required without inputRequests: {requests!r}")
        responses: dict[str, Any] = {}
        for key, request in requests.items():
            if not isinstance(request, dict) or request.get("method") != METHOD_ELICITATION_CREATE:
                raise Failed(f"input request {key!r} is not an elicitation/create form: {request!r}")
            schema = (request.get("params") or {}).get("requestedSchema") or {}
            content = self.options.input_answer or _content_for(schema)
            responses[key] = {"action": "accept", "content": content}
        return responses

    async def status(self, wire: Wire, task_id: str) -> dict[str, Any]:
        """``tasks/get`` of a task the wire's principal owns."""
        return _result(await wire.get(task_id), "tasks/get")

    async def settled(self, opened: Opened) -> dict[str, Any]:
        """Poll ``tasks/get`` (at the interval the server asks, at most 1 s) until the task is terminal."""
        deadline = time.monotonic() + self.options.timeout_s
        while True:
            task = await self.status(self.one, opened.task_id)
            if task.get("status") in TERMINAL:
                return task
            if time.monotonic() > deadline:
                raise Failed(f"task {opened.task_id} still {task.get('status')} after {self.options.timeout_s:g}s")
            await asyncio.sleep(opened.poll_s)

    async def watch(self, wire: Wire, task_id: str, poll_s: float) -> list[str]:
        """The statuses ``tasks/get`` reports over the settle window (a late execution shows there)."""
        seen: list[str] = []
        deadline = time.monotonic() + self.options.settle_s
        while True:
            status = str((await self.status(wire, task_id)).get("status"))
            if not seen or seen[-1] != status:
                seen.append(status)
            if time.monotonic() > deadline:
                return seen
            await asyncio.sleep(min(poll_s, self.options.settle_s / 4))


def _result(answer: Answer, what: str) -> dict[str, Any]:
    if answer.result is None:
        raise Failed(f"{what} answered {answer.brief()}")
    return answer.result


def _text(result: dict[str, Any]) -> str:
    return " ".join(str(item.get("text", "")) for item in result.get("content", []) if isinstance(item, dict))


def body_text(result: dict[str, Any]) -> str:
    """The text content of a ``CallToolResult``."""
    return _text(result)


def _poll_s(created: dict[str, Any]) -> float:
    interval = created.get("pollIntervalMs")
    if isinstance(interval, (int, float)) and interval > 0:
        return min(interval / 1000, _MAX_POLL_S)
    return 0.5


def _content_for(schema: dict[str, Any]) -> dict[str, Any]:
    """A value for each required field of a flat form schema."""
    properties = schema.get("properties") or {}
    content: dict[str, Any] = {}
    for name in schema.get("required") or list(properties):
        spec = properties.get(name) or {}
        kind = spec.get("type", "string")
        if spec.get("enum"):
            content[name] = spec["enum"][0]
        elif kind in ("number", "integer"):
            content[name] = spec.get("minimum", 1)
        elif kind == "boolean":
            content[name] = True
        else:
            content[name] = _ANSWER_TEXT
    return content
