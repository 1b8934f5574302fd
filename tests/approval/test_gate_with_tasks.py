"""The gate as the outermost interceptor, in front of the tasks extension."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

from mcp_approval.approval import PolicyGate
from mcp_approval.checks.wire import envelope
from mcp_approval.client.denials import read_denial
from mcp_approval.denials import Remediation
from mcp_approval.tasks import TaskOptions, TasksExtension, store_from_url
from tests.approval.support import FixedPDP, cedar_pdp, http_wire
from tests.support.polling import eventually
from tests.support.store_leg import leg_store_url

pytestmark = pytest.mark.anyio


def gated_tasks_server(pdp: Any, ran: Counter[str], db: str) -> MCPServer[Any]:
    options = TaskOptions(modes={"deploy": "required"}, allow_anonymous_tasks=True)
    tasks = TasksExtension(options, store=store_from_url(db))
    gate = PolicyGate(pdp, anonymous_principal="alice")
    server: MCPServer[Any] = MCPServer("gated-tasks", extensions=[gate, tasks], lifespan=tasks.lifespan)

    @server.tool()
    async def deploy(env: str) -> str:
        ran["deploy"] += 1
        return f"deployed to {env}"

    return server


async def test_an_allowed_call_still_becomes_a_task_and_a_denied_one_never_does(tmp_path: Any):
    ran: Counter[str] = Counter()
    server = gated_tasks_server(cedar_pdp(), ran, leg_store_url(tmp_path, "tasks.db"))
    async with http_wire(server) as wire:
        allowed = await wire.call_tool("deploy", {"env": "staging"}, meta=envelope(tasks=True))
        denied = await wire.call_tool("deploy", {"env": "prod"}, meta=envelope(tasks=True))
        assert allowed.result["resultType"] == "task"
        done = await eventually(lambda: wire.get(allowed.result["taskId"]), lambda r: r.result["status"] == "completed")
    assert done.result["result"]["content"][0]["text"] == "deployed to staging"
    assert read_denial(denied.result).denial.remediation is Remediation.UNDISCLOSED  # type: ignore[union-attr]
    assert ran["deploy"] == 1  # the allowed call ran once; the denied one never


async def test_a_denial_answers_before_a_required_task_mode_is_enforced(tmp_path: Any):
    ran: Counter[str] = Counter()
    server = gated_tasks_server(FixedPDP(error=RuntimeError("down")), ran, leg_store_url(tmp_path, "tasks.db"))
    async with http_wire(server) as wire:
        reply = await wire.call_tool("deploy", {"env": "staging"}, meta=envelope(tasks=False))
    assert read_denial(reply.result).denial.remediation is Remediation.UNAVAILABLE  # type: ignore[union-attr]
    assert ran == Counter()
