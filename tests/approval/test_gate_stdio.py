"""The policy gate over a real stdio subprocess, through the SDK's client (no HTTP, no challenges)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from mcp_approval.client.denials import denial_of
from mcp_approval.denials import Remediation

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


async def test_over_stdio_allow_runs_and_denials_never_run():
    parameters = StdioServerParameters(
        command=sys.executable, args=["-m", "tests.approval.stdio_server"], cwd=str(ROOT)
    )
    async with Client(parameters) as client:
        allowed = await client.call_tool("echo", {"text": "hi"})
        requestable = await client.call_tool("deploy", {"env": "prod"})
        final = await client.call_tool("drop_table", {"table": "users"})
        counts = await client.call_tool("executions", {})
    assert not allowed.is_error
    assert denial_of(allowed) is None
    assert requestable.is_error
    assert denial_of(requestable).remediation is Remediation.UNDISCLOSED  # type: ignore[union-attr]
    assert "requires approval" in requestable.content[0].text  # type: ignore[union-attr]
    assert final.is_error
    assert denial_of(final).remediation is Remediation.UNAVAILABLE  # type: ignore[union-attr]
    assert counts.structured_content == {"echo": 1}
