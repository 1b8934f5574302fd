"""The product page's "Call → Becomes" rows that no other test covers as stated.

- "a resume with the client's call key: finished in the request, never a task". Our resume is
  the MRTR retry (``inputResponses`` + the sealed ``requestState``). The input round itself is
  always answered in the request, whatever the tool's task mode; the retry is then an ordinary
  call, decided by the tool's mode and ``threshold_s`` like any other (a difference the
  conformance table records: a ``required`` tool's retry is a task).
- ``threshold_s=None``: only pending approvals (and ``required`` tools) become tasks.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp.server.mcpserver import Context, MCPServer

from mcp_approval.checks.wire import Wire
from mcp_approval.tasks import TaskOptions, TasksExtension, store_from_url, task_routing_middleware
from tests.approval.inprocess import inprocess_treasury
from tests.support.polling import eventually

pytestmark = pytest.mark.anyio
BASE_URL = "http://127.0.0.1:8000"


@asynccontextmanager
async def confirming_server(
    tmp_path: Path, released: asyncio.Event | None = None, **options: Any
) -> AsyncIterator[Wire]:
    """A server whose ``confirm_*`` tools ask one MRTR question before answering.

    ``confirm_late`` asks only once ``released`` is set.
    """
    released = released or asyncio.Event()
    store_url = f"sqlite:///{tmp_path / 'tasks.db'}"
    tasks = TasksExtension(TaskOptions(allow_anonymous_tasks=True, **options), store=store_from_url(store_url))
    server: MCPServer[Any] = MCPServer(
        "confirming", extensions=[tasks], lifespan=tasks.lifespan, middleware=[task_routing_middleware]
    )

    async def confirm(ctx: Context[Any, Any]) -> types.CallToolResult | types.InputRequiredResult:
        answer = (ctx.input_responses or {}).get("sure")
        if answer is None:
            question = types.ElicitRequestFormParams(
                message="Sure?", requested_schema={"type": "object", "properties": {}}
            )
            return types.InputRequiredResult(
                input_requests={"sure": types.ElicitRequest(params=question)}, request_state="round-1"
            )
        action = answer.action if isinstance(answer, types.ElicitResult) else "?"
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"confirmed: {action}")])

    async def confirm_when_released(ctx: Context[Any, Any]) -> types.CallToolResult | types.InputRequiredResult:
        await released.wait()  # held until the test has seen the call become a task
        return await confirm(ctx)

    server.add_tool(confirm, name="confirm_required")
    server.add_tool(confirm, name="confirm_optional")
    server.add_tool(confirm_when_released, name="confirm_late")
    app = server.streamable_http_app(json_response=True)
    async with (
        server.session_manager.run(),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE_URL) as http,
    ):
        yield Wire(http)


MODES = {"confirm_required": "required", "confirm_optional": "optional"}
TERMINAL = ("completed", "failed", "cancelled")


@pytest.mark.parametrize("tool", ["confirm_required", "confirm_optional"])
async def test_an_input_round_is_answered_in_the_request_never_as_a_task(tmp_path: Path, tool: str) -> None:
    async with confirming_server(tmp_path, threshold_s=0.5, modes=MODES) as wire:
        asked = (await wire.call_tool(tool, {})).result
        assert asked["resultType"] == "input_required"
        assert "taskId" not in asked
        assert set(asked["inputRequests"]) == {"sure"}
        resumed = await wire.request(
            "tools/call",
            {
                "name": tool,
                "arguments": {},
                "inputResponses": {"sure": {"action": "accept", "content": {}}},
                "requestState": asked["requestState"],
            },
        )
        answer = resumed.result
        if answer["resultType"] == "task":  # a required tool's retry is a task (recorded difference)
            assert tool == "confirm_required"
            done = await eventually(
                lambda: wire.get(answer["taskId"]), lambda reply: reply.result["status"] == "completed"
            )
            answer = done.result["result"]
    assert answer["content"][0]["text"] == "confirmed: accept"


@pytest.mark.parametrize("tool", ["confirm_required", "confirm_optional"])
async def test_an_input_round_is_never_a_task_even_with_threshold_zero(tmp_path: Path, tool: str) -> None:
    """A round the call answers before its promotion commits is answered in the request."""
    async with confirming_server(tmp_path, threshold_s=0.0, modes=MODES) as wire:
        asked = (await wire.call_tool(tool, {})).result
        listed = await wire.request("tools/list", {})
    assert asked["resultType"] == "input_required"
    assert "taskId" not in asked
    assert listed.result["tools"]  # the server is still healthy; no task was left behind to fail


async def task_asking(wire: Wire, released: asyncio.Event) -> tuple[str, str]:
    """Call ``confirm_late`` (a task at once), let it ask, and return (task id, input key)."""
    created = (await wire.call_tool("confirm_late", {})).result
    assert created["resultType"] == "task"
    assert created["status"] == "working"
    released.set()
    waiting = await eventually(lambda: wire.get(created["taskId"]), lambda reply: reply.result["status"] != "working")
    assert waiting.result["status"] == "input_required"
    [(key, request)] = waiting.result["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    assert request["params"]["message"] == "Sure?"
    assert "round-1" not in str(waiting.result)  # the tool's requestState stays in the server
    return created["taskId"], key


async def test_an_input_round_after_promotion_is_asked_through_the_task(tmp_path: Path) -> None:
    released = asyncio.Event()
    async with confirming_server(tmp_path, released, threshold_s=0.0) as wire:
        task_id, key = await task_asking(wire, released)
        await wire.update(task_id, {key: {"action": "accept", "content": {}}})
        done = await eventually(lambda: wire.get(task_id), lambda reply: reply.result["status"] in TERMINAL)
    assert done.result["status"] == "completed", done.result
    assert done.result["result"]["content"][0]["text"] == "confirmed: accept"


async def test_an_invalid_answer_to_a_task_asked_round_fails_the_task_naming_the_key(tmp_path: Path) -> None:
    released = asyncio.Event()
    async with confirming_server(tmp_path, released, threshold_s=0.0) as wire:
        task_id, key = await task_asking(wire, released)
        await wire.update(task_id, {key: {"action": "maybe"}})
        done = await eventually(lambda: wire.get(task_id), lambda reply: reply.result["status"] in TERMINAL)
    assert done.result["status"] == "failed"
    assert done.result["error"]["code"] == -32602
    assert "sure" in done.result["error"]["message"]


async def test_a_resume_of_an_optional_tool_finishes_in_the_request(tmp_path: Path) -> None:
    async with confirming_server(tmp_path, threshold_s=5.0, modes={"confirm_optional": "optional"}) as wire:
        asked = (await wire.call_tool("confirm_optional", {})).result
        resumed = await wire.request(
            "tools/call",
            {
                "name": "confirm_optional",
                "arguments": {},
                "inputResponses": {"sure": {"action": "decline"}},
                "requestState": asked["requestState"],
            },
        )
    assert resumed.result["resultType"] == "complete"
    assert resumed.result["content"][0]["text"] == "confirmed: decline"


async def test_threshold_none_makes_only_pending_approvals_tasks(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path, {"tasks": {"threshold_s": 0.0}}) as harness:
        tasks = harness.deployment.tasks
        eager = (await harness.alice.call_tool("wire_transfer", {"to": "acct-t0", "amount": 10})).result
        tasks.options = tasks.options.model_copy(update={"threshold_s": None})  # TOML has no null: set it in code
        small = (await harness.alice.call_tool("wire_transfer", {"to": "acct-tnone", "amount": 10})).result
        large = (await harness.alice.call_tool("wire_transfer", {"to": "acct-tbig", "amount": 30_000})).result
    assert eager["resultType"] == "task"  # threshold 0: a permitted call becomes a task
    assert small["resultType"] == "complete"
    assert small["isError"] is False
    assert large["resultType"] == "task"
    assert large["status"] == "working"
