"""The quick start's client snippet, run as written against the treasury example.

The snippet is taken from ``docs/quickstart.md`` with two substitutions (the server's address,
and a short ``task_wait_s`` so that the call outlasts its wait): it must print the task id on
``TaskPendingError``, resume the task on a new connection, and print the approved outcome once
a reviewer approves.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from asyncio.subprocess import PIPE
from pathlib import Path

import httpx
import pytest

from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir
from tests.treasury.helpers import approval_for

pytestmark = pytest.mark.anyio

QUICKSTART = Path(__file__).resolve().parents[2] / "docs" / "quickstart.md"
HEADING = "## One approval, end to end"


def client_snippet() -> str:
    """The first Python block under the heading."""
    text = QUICKSTART.read_text(encoding="utf-8")
    section = text[text.index(HEADING) :]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "no python block under " + HEADING
    return match.group(1)


def substitute(code: str, old: str, new: str) -> str:
    assert code.count(old) == 1, f"the snippet no longer holds {old!r}"
    return code.replace(old, new)


async def test_the_client_snippet_resumes_a_pending_task_and_prints_the_outcome(tmp_path: Path) -> None:
    server = TreasuryServer(deployment_dir(tmp_path)).start()
    script = tmp_path / "quickstart_client.py"
    code = substitute(client_snippet(), '"http://127.0.0.1:8000/mcp"', f'"{server.base_url}/mcp"')
    script.write_text(substitute(code, "TasksClient(task_wait_s=60)", "TasksClient(task_wait_s=0.5)"))
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}  # each line as it is printed
    client = await asyncio.create_subprocess_exec(
        sys.executable, str(script), stdout=PIPE, stderr=PIPE, env=environment
    )
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            carol = Reviewer(http, "carol-token")
            request = await approval_for(carol, "wire_transfer", to="acme")
            # Approve only once the first wait has ended, so that the snippet's resume is what ends.
            assert client.stdout is not None
            first = await asyncio.wait_for(client.stdout.readline(), timeout=scaled(30))
            assert first.decode().startswith("still pending: "), first
            decided = await carol.decide(request["id"], "approve")
            assert decided.status_code == 200, decided.text
        rest, errors = await asyncio.wait_for(client.communicate(), timeout=scaled(60))
    finally:
        if client.returncode is None:
            client.kill()
            await client.wait()
        server.kill()
    assert client.returncode == 0, errors.decode()
    lines = rest.decode().splitlines()
    assert lines, errors.decode()
    assert lines[-1].startswith("approved-executed "), lines
    assert [entry["to"] for entry in server.ledger()] == ["acme"]
