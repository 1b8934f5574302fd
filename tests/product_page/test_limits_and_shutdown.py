"""The product page's limits, anonymous callers and shutdown, on the deployment (``mcp-approval serve``).

The tasks extension's own limits (``max_tasks``, ``max_per_principal``) and its anonymous rule
are covered in ``tests/tasks/test_tasks_wire.py``; here the same rules are checked where an approval
port is installed: approval tasks have their own per-principal limits, anonymous HTTP callers
are refused before any task exists, and a graceful shutdown cancels running tasks while pending
approval tasks (which run nothing) survive it.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

import httpx
import pytest

from mcp_approval.checks.wire import Wire
from mcp_approval.tasks.states import TaskStatus
from tests.approval.inprocess import inprocess_treasury
from tests.support.polling import eventually
from tests.support.timing import scaled
from tests.support.treasury import TreasuryServer, deployment_dir, principals
from tests.treasury.helpers import AUTHORIZATION, settled, text_of

pytestmark = pytest.mark.anyio

SLOW_TOOLS = Path(__file__).with_name("slow_tools.py")
PERMIT_SLOW = '\npermit (principal, action == Action::"tools/call", resource == tool::"slow_report");\n'


async def test_approval_limits_answer_without_a_task_and_warn(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    limits = {"approval": {"max_pending_per_principal": 1}}
    async with inprocess_treasury(tmp_path, limits) as harness:
        first = (await harness.alice.call_tool("wire_transfer", {"to": "acct-lim-1", "amount": 30_000})).result
        with caplog.at_level(logging.WARNING, logger="mcp_approval.approval"):
            second = (await harness.alice.call_tool("wire_transfer", {"to": "acct-lim-2", "amount": 30_000})).result
        active = await harness.deployment.tasks.store.count_active()
    assert first["resultType"] == "task"
    assert second.get("resultType") != "task"
    assert second["isError"] is True
    assert second["_meta"][AUTHORIZATION]["remediation"] == "unavailable"
    assert "Too many approval requests" in text_of(second)
    assert active == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("approval submission refused" in m and m.endswith("too_many_pending") for m in warnings), warnings


async def test_an_anonymous_http_caller_never_gets_a_task(tmp_path: Path) -> None:
    async with inprocess_treasury(tmp_path) as harness:
        anonymous = Wire(harness.http, token=None)
        refused = [
            await anonymous.call_tool("wire_transfer", {"to": "acct-anon", "amount": 30_000}),
            await anonymous.call_tool("wire_transfer", {"to": "acct-anon", "amount": 10}),
        ]
        active = await harness.deployment.tasks.store.count_active()
        pending = await harness.reviewer("carol").pending()
    for reply in refused:
        assert reply.status == 401  # bearer auth answers before any tool, gate or task runs
        assert "result" not in reply.body
    assert active == 0
    assert pending == []
    assert harness.ledger() == []


def slow_deployment(tmp_path: Path) -> Path:
    """The treasury example plus ``slow_report``, with every permitted call a task at once."""
    overrides = {"tasks": {"threshold_s": 0.0}, "tools": {"module": str(SLOW_TOOLS), "settings": {"ledger": "l.jsonl"}}}
    directory = deployment_dir(tmp_path, overrides)
    with (directory / "policy.cedar").open("a") as policy:
        policy.write(PERMIT_SLOW)
    return directory


@pytest.mark.slow
async def test_a_graceful_shutdown_cancels_running_tasks_and_keeps_pending_approvals(tmp_path: Path) -> None:
    directory = slow_deployment(tmp_path)
    server = TreasuryServer(directory).start()
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            alice = principals(http)["alice"]
            running = (await alice.call_tool("slow_report", {"seconds": 120})).result
            pending = (await alice.call_tool("wire_transfer", {"to": "acct-shutdown", "amount": 30_000})).result
            assert running["resultType"] == pending["resultType"] == "task"
            started = directory / "slow_report.started"
            await eventually(lambda: _exists(started), bool)
            assert (await alice.get(running["taskId"])).result["status"] == TaskStatus.WORKING
        assert server.process is not None
        server.process.send_signal(signal.SIGTERM)
        # uvicorn shuts down gracefully, then re-raises the SIGTERM it caught
        assert server.wait_exit(30) in (0, -signal.SIGTERM)
        restarted = TreasuryServer(directory).start()
        try:
            async with httpx.AsyncClient(base_url=restarted.base_url, timeout=scaled(20)) as http:
                alice = principals(http)["alice"]
                cancelled = await settled(alice, running["taskId"])
                kept = (await alice.get(pending["taskId"])).result
        finally:
            restarted.kill()
    finally:
        server.kill()
    assert cancelled["status"] == "cancelled"
    assert "result" not in cancelled
    assert kept["status"] == "working"  # an approval task runs nothing until decided: it survives


async def _exists(path: Path) -> bool:
    return await asyncio.to_thread(path.exists)
