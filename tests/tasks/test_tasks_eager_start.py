"""An optional tool starts at once, in a task of its own that it keeps until it ends.

The call's task runs its first step inside the request (no event-loop round trip for a call that
finishes at once), yet it is the running task from the first step on: cancel scopes entered
before the call became a task are left in the task that entered them.
"""

from __future__ import annotations

import asyncio

import anyio
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from mcp_approval.client import TasksClient
from mcp_approval.tasks import TaskOptions, TasksExtension, store_from_url, task_routing_middleware
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio


def tasks_server() -> tuple[MCPServer, TasksExtension, list[asyncio.Task[object] | None]]:
    tasks = TasksExtension(TaskOptions(threshold_s=0.05, poll_interval_s=0.02), store=store_from_url("sqlite://"))
    server = MCPServer(
        "eager",
        extensions=[tasks],
        lifespan=tasks.lifespan,
        middleware=[task_routing_middleware, tasks.listen_middleware],
    )
    seen: list[asyncio.Task[object] | None] = []

    @server.tool()
    async def scoped(seconds: float) -> str:
        """Sleep inside an anyio scope and an asyncio timeout, both entered before the first await."""
        seen.append(asyncio.current_task())
        with anyio.fail_after(30):
            async with asyncio.timeout(30):
                await asyncio.sleep(seconds)
        seen.append(asyncio.current_task())
        return f"slept {seconds}"

    @server.tool()
    async def at_once() -> str:
        """Finish without ever suspending."""
        seen.append(asyncio.current_task())
        return "done"

    return server, tasks, seen


async def test_a_call_that_outlasts_the_threshold_keeps_its_task_and_runs_once():
    server, tasks, seen = tasks_server()
    with anyio.fail_after(scaled(30)):  # a bound that fails the test, not a synchronization
        async with Client(server, extensions=[TasksClient(task_wait_s=scaled(10))]) as client:
            result = await client.call_tool("scoped", {"seconds": 0.3})  # a task after 0.05 s
            stored = await tasks.store.count_active()
    assert result.content[0].text == "slept 0.3"
    assert len(seen) == 2  # one run
    assert seen[0] is not None
    assert seen[0] is seen[1]
    assert stored == 0  # the task ended completed


async def test_a_call_that_never_suspends_is_answered_inline_from_its_own_task():
    server, _, seen = tasks_server()
    with anyio.fail_after(scaled(30)):
        async with Client(server, extensions=[TasksClient(task_wait_s=scaled(10))]) as client:
            first = await client.call_tool("at_once", {})
            second = await client.call_tool("at_once", {})
    assert (first.content[0].text, second.content[0].text) == ("done", "done")
    assert seen[0] is not None
    assert seen[1] is not None
    assert seen[0] is not seen[1]  # each call in a task of its own
    assert seen[0].done()
    assert seen[1].done()
