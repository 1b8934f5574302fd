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
RUN_TIMEOUT_S = scaled(120.0)  # one example process; a loaded 2-core machine takes seconds to import a framework


class Example:
    """One example script with its own state directory, against one treasury server or several named ones."""

    def __init__(self, name: str, treasury: TreasuryServer | dict[str, TreasuryServer], state: Path) -> None:
        self.script = EXAMPLES / f"{name}.py"
        self.servers = treasury if isinstance(treasury, dict) else {"": treasury}
        self.state = state

    def argv(self, *command: str, servers: list[str] | None = None) -> list[str]:
        urls: list[str] = []
        for server_name in self.servers if servers is None else servers:
            url = f"{self.servers[server_name].base_url}/mcp"
            urls += ["--url", f"{server_name}={url}" if server_name else url]
        options = [*urls, "--token", "alice-token", "--state", str(self.state), "--scripted"]
        return [sys.executable, str(self.script), *options, *command]

    def run(self, *command: str, servers: list[str] | None = None, exit_code: int = 0) -> str:
        """Run to the end; its standard output (its standard error when ``exit_code`` is not 0)."""
        done = subprocess.run(
            self.argv(*command, servers=servers),
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            env=_environment(),
        )
        streams = f"{done.stdout}\n{done.stderr}"
        assert done.returncode == exit_code, f"{command[0]} exited {done.returncode}, not {exit_code}:\n{streams}"
        return done.stdout if exit_code == 0 else done.stderr

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


def pending_requests(treasury: TreasuryServer, account: str) -> list[dict[str, Any]]:
    """The pending approval requests for a transfer to ``account``, as the reviewer API lists them."""
    with httpx.Client(
        base_url=treasury.base_url, headers={"Authorization": "Bearer carol-token"}, timeout=scaled(20)
    ) as http:
        listing = http.get("/approvals", params={"status": "pending"}).json()["approvals"]
    return [r for r in listing if r["tool"] == "wire_transfer" and r["arguments"].get("to") == account]


def decide(treasury: TreasuryServer, account: str, decision: str) -> dict[str, Any]:
    """The reviewer (carol) decides the one pending request for a transfer to ``account``."""
    mine = pending_requests(treasury, account)
    assert len(mine) == 1, f"{len(mine)} pending requests for {account}"
    with httpx.Client(
        base_url=treasury.base_url, headers={"Authorization": "Bearer carol-token"}, timeout=scaled(20)
    ) as http:
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


def two_servers(name: str, a: TreasuryServer, b: TreasuryServer, state: Path, decision: str) -> None:
    """One turn calls a (no approval needed) and b (gated): paused; a resume given only a is refused and
    sends nothing; b's reviewer decides; a new process resumes with both: each outcome reaches the model."""
    example = Example(name, {"a": a, "b": b}, state)
    on_a, on_b = new_account("a"), new_account("b")
    started = example.run("start", f"Send 5000 to {on_a} on a and send 5000 to {on_b} on b")
    reference = pending_reference(started)
    assert (transfers_to(a, on_a), transfers_to(b, on_b)) == (1, 0), started
    refused = example.run("resume", servers=["a"], exit_code=2)
    for said in ("server 'b'", reference, "nothing was sent"):
        assert said in refused, refused
    assert (transfers_to(a, on_a), transfers_to(b, on_b)) == (1, 0)  # a's call was not made again on a
    assert len(pending_requests(b, on_b)) == 1  # b's request is untouched
    assert not pending_requests(a, on_b)
    decide(b, on_b, decision)
    output = example.run("resume")
    messages = example.finished_messages()
    for text in (output, messages):
        assert f"to {on_a} completed" in text, text
    if decision == "approve":
        for text in (output, messages):
            assert f"to {on_b} completed" in text, text
        assert (transfers_to(a, on_a), transfers_to(b, on_b)) == (1, 1)
    else:
        assert "denied" in output, output
        for text in (output, messages):
            assert "did not run" in text, text
        assert (transfers_to(a, on_a), transfers_to(b, on_b)) == (1, 0)
