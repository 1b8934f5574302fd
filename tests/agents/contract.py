"""The examples' contract, run against a served treasury example: each framework's test calls these.

Every run is a real process (``examples/agents/NAME.py``, in this interpreter's environment, where
the framework is installed); the reviewer is plain HTTP against the reviewer API; the ledger file
counts executions.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.timing import scaled
from tests.support.treasury import TreasuryServer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"
#: How long one run of an example may take before it counts as hung.
RUN_TIMEOUT_S = scaled(60.0)


class Example:
    """One example script with its own state directory, against ``treasury``."""

    def __init__(self, name: str, treasury: TreasuryServer, state: Path) -> None:
        self.script = EXAMPLES / f"{name}.py"
        self.treasury = treasury
        self.state = state

    def argv(self, *command: str) -> list[str]:
        url = f"{self.treasury.base_url}/mcp"
        options = ["--url", url, "--token", "alice-token", "--state", str(self.state), "--scripted"]
        return [sys.executable, str(self.script), *options, *command]

    def run(self, *command: str) -> str:
        """Run to the end; its standard output (a failure carries both streams)."""
        done = subprocess.run(
            self.argv(*command), capture_output=True, text=True, timeout=RUN_TIMEOUT_S, env=_environment()
        )
        assert done.returncode == 0, f"{command[0]} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def resume_killed_while_waiting(self, reference: str) -> None:
        """Start ``resume``, wait until it says it waits for ``reference``, then SIGKILL it."""
        process = subprocess.Popen(
            self.argv("resume"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_environment()
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline()  # blocks until the example says it waits (or exits)
            assert line.strip() == f"waiting {reference}", f"resume said {line!r}: {process.stderr}"
            assert process.poll() is None
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(scaled(10))
        assert process.returncode == -signal.SIGKILL

    def finished_messages(self) -> str:
        """The model's messages of the finished run, as JSON text."""
        return json.dumps(json.loads((self.state / "finished.json").read_text())["messages"])


def _environment() -> dict[str, str]:
    return {**os.environ, "OPENAI_AGENTS_DISABLE_TRACING": "1", "PYTHONUNBUFFERED": "1"}


def pending_reference(output: str) -> str:
    match = re.search(r"^pending (\S+)$", output, re.MULTILINE)
    assert match is not None, f"no pending reference in {output!r}"
    return match.group(1)


def new_account(mode: str) -> str:
    return f"agent-{mode}-{secrets.token_hex(4)}"


def transfers_to(treasury: TreasuryServer, account: str) -> int:
    return sum(1 for entry in treasury.ledger() if entry.get("op") == "wire_transfer" and entry.get("to") == account)


def decide(treasury: TreasuryServer, account: str, decision: str) -> dict[str, Any]:
    """The reviewer (carol) decides the one pending request for a transfer to ``account``."""
    with httpx.Client(
        base_url=treasury.base_url, headers={"Authorization": "Bearer carol-token"}, timeout=scaled(20)
    ) as http:
        listing = http.get("/approvals", params={"status": "pending"}).json()["approvals"]
        mine = [r for r in listing if r["tool"] == "wire_transfer" and r["arguments"].get("to") == account]
        assert len(mine) == 1, f"{len(mine)} pending requests for {account}"
        decided = http.post(f"/approvals/{mine[0]['id']}/decide", json={"decision": decision, "comment": "test"})
        assert decided.status_code == 200, decided.text
        record: dict[str, Any] = decided.json()
        return record


def approved_after_a_kill(name: str, treasury: TreasuryServer, state: Path) -> None:
    """start → paused → a waiting resume is SIGKILLed → approve → a new resume finishes; ran once."""
    example, account = Example(name, treasury, state), new_account("approve")
    reference = pending_reference(example.run("start", f"Send 30000 to {account}"))
    assert transfers_to(treasury, account) == 0
    example.resume_killed_while_waiting(reference)
    decide(treasury, account, "approve")
    started = time.monotonic()
    output = example.run("resume")
    assert f"to {account} completed" in output, output
    assert f"to {account} completed" in example.finished_messages()
    assert transfers_to(treasury, account) == 1
    again = example.run("resume")  # a finished run: its recorded result, nothing is called
    assert again.strip(), output
    assert output.endswith(again), (again, output)
    assert transfers_to(treasury, account) == 1
    assert time.monotonic() - started < RUN_TIMEOUT_S


def denied(name: str, treasury: TreasuryServer, state: Path) -> None:
    """start → paused → deny → resume: the model sees the denial; nothing ran."""
    example, account = Example(name, treasury, state), new_account("deny")
    pending_reference(example.run("start", f"Send 30000 to {account}"))
    decide(treasury, account, "deny")
    output = example.run("resume")
    assert "denied" in output, output
    assert "did not run" in output, output
    assert "did not run" in example.finished_messages()
    assert transfers_to(treasury, account) == 0


def no_approval_needed(name: str, treasury: TreasuryServer, state: Path) -> None:
    """A call under the threshold finishes in ``start``, as the plain integration would answer it."""
    example, account = Example(name, treasury, state), new_account("small")
    output = example.run("start", f"Send 100 to {account}")
    assert "pending" not in output
    assert f"to {account} completed" in output, output
    assert transfers_to(treasury, account) == 1
