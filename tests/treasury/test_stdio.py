"""The treasury deployment on stdio (``serve --stdio``) with a real SDK client; reviewers use the CLI.

Every SEP-2643 placement a stdio server can produce travels as the envelope alone: the task
placement (a requestable denial held in a task), the final denial, and the allowed call.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from mcp_approval.client import TaskPendingError, TasksClient, read_disposition
from mcp_approval.client.denials import denial_of
from mcp_approval.denials import Remediation
from tests.support.polling import eventually
from tests.support.treasury import deployment_dir

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


async def review(directory: Path, *args: str) -> str:
    """``mcp-approval review ...`` against the deployment's store; returns stdout."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mcp_approval",
        "review",
        *args,
        "--config",
        str(directory / "config.toml"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode()


@pytest.mark.sep_check("sep-2643-server-task-hint", "sep-2643-server-task-needs-declared-tasks")
async def test_an_approval_task_over_stdio_is_decided_from_the_cli(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path, {"server": {"name": "treasury", "dev_mode": True, "stdio_principal": "alice"}})
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_approval", "serve", "--stdio", "--config", str(directory / "config.toml")],
        cwd=str(ROOT),
    )
    tasks = TasksClient(task_wait_s=0.2, default_poll_interval_s=0.05)
    async with Client(parameters, extensions=[tasks]) as client:
        allowed = await client.call_tool("wire_transfer", {"to": "acct-stdio-small", "amount": 100})
        final = await client.call_tool("delete_account", {"account": "acct-stdio"})
        with pytest.raises(TaskPendingError) as pending:
            await client.call_tool("wire_transfer", {"to": "acct-stdio", "amount": 30_000})

        async def pending_ids() -> list[str]:
            listed = json.loads(await review(directory, "list", "--json"))
            items = listed["approvals"] if isinstance(listed, dict) else listed
            return [item["id"] for item in items if item["arguments"].get("to") == "acct-stdio"]

        (approval_id,) = await eventually(pending_ids, lambda ids: len(ids) == 1)
        await review(directory, "approve", approval_id, "--as", "carol", "--comment", "invoice checked")
        tasks.task_wait_s = 20  # the server learns of the CLI's decision at its next poll
        result = await tasks.resume(client.session, pending.value.task_id)
    assert not allowed.is_error
    assert final.is_error
    assert denial_of(final).remediation is Remediation.UNAVAILABLE  # type: ignore[union-attr]
    assert isinstance(result, types.CallToolResult)
    assert not result.is_error
    disposition = read_disposition(result)
    assert disposition is not None
    assert disposition.executed
    ledger = [json.loads(line) for line in (directory / "ledger.jsonl").read_text().splitlines()]
    assert [entry["to"] for entry in ledger] == ["acct-stdio-small", "acct-stdio"]
