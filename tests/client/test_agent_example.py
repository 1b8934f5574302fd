"""``examples/agent/agent.py`` killed with SIGKILL at three points, restarted with the same ``call_key``.

Each scenario has its own account; the treasury ledger must show exactly one transfer to it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.polling import eventually
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir
from tests.treasury.helpers import approval_for

pytestmark = pytest.mark.anyio

AGENT = Path(__file__).resolve().parents[2] / "examples" / "agent" / "agent.py"


@pytest.fixture(scope="module")
def treasury(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TreasuryServer]:
    server = TreasuryServer(deployment_dir(tmp_path_factory.mktemp("agent"))).start()
    try:
        yield server
    finally:
        server.kill()


class Agent:
    """One run of the example agent, its output in a file."""

    def __init__(self, server: TreasuryServer, tmp_path: Path, account: str, *extra: str) -> None:
        self.output = tmp_path / f"agent-{len(list(tmp_path.glob('agent-*.out')))}.out"
        command = [sys.executable, str(AGENT), f"{server.base_url}/mcp", "--call-key", f"run-1/{account}"]
        command += ["--to", account, "--journal", str(tmp_path / "calls.sqlite3"), *extra]
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        with self.output.open("wb") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=environment)

    def text(self) -> str:
        return self.output.read_text(errors="replace")

    async def says(self, words: str) -> None:
        async def read() -> str:
            return self.text()

        await eventually(read, lambda text: words in text or self.process.poll() is not None, timeout_s=scaled(30))
        assert words in self.text(), self.text()

    def finish(self) -> int:
        return self.process.wait(scaled(30))


async def approve(server: TreasuryServer, account: str) -> None:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
        carol = Reviewer(http, "carol-token")
        approval = await approval_for(carol, "wire_transfer", to=account)
        assert (await carol.decide(approval["id"], "approve")).status_code == 200


def transfers_to(server: TreasuryServer, account: str) -> int:
    return len([entry for entry in server.ledger() if entry.get("to") == account])


async def restarted_result(server: TreasuryServer, tmp_path: Path, account: str) -> str:
    again = Agent(server, tmp_path, account)
    assert again.finish() == 0, again.text()
    return again.text()


async def test_killed_while_the_call_waits_resumes_the_same_task(treasury: TreasuryServer, tmp_path: Path) -> None:
    agent = Agent(treasury, tmp_path, "acct-agent-waiting")
    await agent.says("journaled task")
    agent.process.send_signal(signal.SIGKILL)
    assert agent.finish() == -signal.SIGKILL
    await approve(treasury, "acct-agent-waiting")
    output = await restarted_result(treasury, tmp_path, "acct-agent-waiting")
    assert "result: Transfer of $30,000.00 to acct-agent-waiting completed." in output
    assert transfers_to(treasury, "acct-agent-waiting") == 1


async def test_killed_right_after_the_task_id_is_journaled(treasury: TreasuryServer, tmp_path: Path) -> None:
    agent = Agent(treasury, tmp_path, "acct-agent-journaled", "--crash-at", "journaled")
    assert agent.finish() == -signal.SIGKILL, agent.text()
    assert "journaled task" in agent.text()
    await approve(treasury, "acct-agent-journaled")
    output = await restarted_result(treasury, tmp_path, "acct-agent-journaled")
    assert "result: Transfer of $30,000.00 to acct-agent-journaled completed." in output
    assert "journaled task" not in output  # the restart called no tool: it polled the journaled task
    assert transfers_to(treasury, "acct-agent-journaled") == 1


async def test_killed_after_the_result_replays_the_recorded_outcome(treasury: TreasuryServer, tmp_path: Path) -> None:
    agent = Agent(treasury, tmp_path, "acct-agent-finished", "--crash-at", "finished")
    await agent.says("journaled task")
    await approve(treasury, "acct-agent-finished")
    assert agent.finish() == -signal.SIGKILL, agent.text()
    assert "result:" not in agent.text()
    assert transfers_to(treasury, "acct-agent-finished") == 1
    output = await restarted_result(treasury, tmp_path, "acct-agent-finished")
    assert "result: Transfer of $30,000.00 to acct-agent-finished completed." in output
    assert transfers_to(treasury, "acct-agent-finished") == 1
