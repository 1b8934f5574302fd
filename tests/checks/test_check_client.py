"""``mcp-approval check-client`` judges real clients: this project's (with and without tasks)
passes, and a client that breaks the client statements fails exactly those scenarios."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcp_approval.checks.client_scenarios import CLIENT_SCENARIOS
from mcp_approval.hosts import unused_loopback_port
from tests.support.timing import scaled

ROOT = Path(__file__).resolve().parents[2]

EXPECTED = {
    "tasks": {"client-handles-degraded-answer": "SKIP"},
    "none": {scenario: "SKIP" for scenario, *_ in CLIENT_SCENARIOS if scenario != "client-handles-degraded-answer"},
    # Two different payees: two calls, neither a retry of the other.
    "payees": {scenario: "SKIP" for scenario, *_ in CLIENT_SCENARIOS if scenario != "client-handles-degraded-answer"},
    "careless": {
        "client-sends-mcp-name": "FAIL",
        "client-honours-poll-interval": "FAIL",
        "client-answers-input-through-update": "FAIL",
        "client-never-recreates-task": "FAIL",
        "client-handles-degraded-answer": "SKIP",
    },
}


def wait_listening(port: int, process: subprocess.Popen[str], timeout_s: float | None = None) -> None:
    """Return once 127.0.0.1:``port`` accepts connections (fail if the harness exits first; ``scaled(60)``)."""
    limit_s = scaled(60) if timeout_s is None else timeout_s
    deadline = time.monotonic() + limit_s
    while True:
        assert process.poll() is None, process.communicate()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            assert time.monotonic() < deadline, f"the harness did not listen within {limit_s:.0f}s"
            time.sleep(0.05)


@pytest.mark.parametrize("mode", sorted(EXPECTED))
def test_the_harness_judges_what_the_client_did(mode: str, tmp_path: Path) -> None:
    port = unused_loopback_port()
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "mcp_approval", "check-client", "--port", str(port), "--timeout", "60"]
    harness = subprocess.Popen(
        [*command, "--grace", "1", "--report", str(report)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        wait_listening(port, harness)
        url = f"http://127.0.0.1:{port}/mcp"
        client = subprocess.run(
            [sys.executable, "-m", "tests.checks.client_runs", url, mode],
            capture_output=True,
            text=True,
            timeout=scaled(60),
            cwd=ROOT,
            check=False,
        )
        assert client.returncode == 0, client.stderr
        out, err = harness.communicate(timeout=scaled(90))
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait(scaled(10))
    outcomes = {item["scenario"]: item["outcome"] for item in json.loads(report.read_text())["scenarios"]}
    expected = {scenario: EXPECTED[mode].get(scenario, "PASS") for scenario, *_ in CLIENT_SCENARIOS}
    assert outcomes == expected, out + err
    assert harness.returncode == (1 if "FAIL" in expected.values() else 0), out + err
    notes = {item["scenario"]: item["notes"] for item in json.loads(report.read_text())["scenarios"]}
    if mode == "careless":  # the same call with its keys reordered counted as the same; the changed one flagged
        assert "the client called transfer again 1 time(s)" in out, out
        (flag,) = notes["client-never-recreates-task"]
        assert flag.startswith("called transfer again with changed arguments (amount: 100 -> 250)"), flag
    if mode == "payees":
        assert notes["client-handles-degraded-answer"] == [
            "2 different calls got the degraded answer: each a call of its own, not a retry"
        ]
