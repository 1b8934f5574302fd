"""The tool-approval chapter's requester-page snippets, run as written against the treasury example.

The TOML block is the deployment's ``[approval]`` (with the page on this server's address); the
Python block runs with one substitution (the server's address): the SDK ``Client`` prints the page
link its elicitation callback received, ``call_tool`` returns the pending answer (the round ends),
the page shows the open request, and once a reviewer approves, calling again returns the result of
the one execution (one ledger entry).
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import tomllib
from asyncio.subprocess import PIPE
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir
from tests.treasury.helpers import approval_for

pytestmark = pytest.mark.anyio

CHAPTER = Path(__file__).resolve().parents[2] / "docs" / "tool-approval.md"
HEADING = "### A page for the requester (`requester_url`)"


def block(fence: str) -> str:
    """The first ``fence`` block under the heading."""
    text = CHAPTER.read_text(encoding="utf-8")
    section = text[text.index(HEADING) :]
    match = re.search(rf"```{fence}\n(.*?)```", section, re.DOTALL)
    assert match is not None, f"no {fence} block under {HEADING}"
    return match.group(1)


def substitute(code: str, old: str, new: str) -> str:
    assert code.count(old) == 1, f"the snippet no longer holds {old!r}"
    return code.replace(old, new)


async def test_the_snippets_send_the_requester_to_its_page_and_return_the_result_once(tmp_path: Path) -> None:
    approval = tomllib.loads(block("toml"))["approval"]
    assert approval["without_tasks"] == "request"
    server = TreasuryServer(deployment_dir(tmp_path))
    page_url = substitute(approval["requester_url"], "https://mcp.example.com", server.base_url)
    deployment_dir(tmp_path, {"approval": {**approval, "requester_url": page_url}})  # the same copy, now with it
    server.start()
    script = tmp_path / "requester_client.py"
    script.write_text(substitute(block("python"), '"http://127.0.0.1:8000/mcp"', f'"{server.base_url}/mcp"'))
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
    client = await asyncio.create_subprocess_exec(
        sys.executable, str(script), stdout=PIPE, stderr=PIPE, env=environment
    )
    try:
        assert client.stdout is not None
        first = (await asyncio.wait_for(client.stdout.readline(), timeout=scaled(60))).decode()
        assert first.startswith("approval page: "), first
        link = first.removeprefix("approval page: ").strip()
        assert link.startswith(f"{server.base_url}/requests/")
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            page = await http.get(urlsplit(link).path)
            assert page.status_code == 200
            assert "Waiting for a decision" in page.text
            carol = Reviewer(http, "carol-token")
            request = await approval_for(carol, "wire_transfer", to="acme")
            assert (await carol.decide(request["id"], "approve")).status_code == 200
        out, err = await asyncio.wait_for(client.communicate(), timeout=scaled(120))
        assert client.returncode == 0, err.decode()
        assert out.decode().strip() == "Transfer of $30,000.00 to acme completed."
        assert sum(1 for entry in server.ledger() if entry.get("to") == "acme") == 1
    finally:
        if client.returncode is None:
            client.kill()
            await client.wait()
        server.kill()
