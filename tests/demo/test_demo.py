"""``mcp-approval demo --json`` as a subprocess: the stable contract CI relies on.

The demo starts its own servers (real subprocesses on free loopback ports, SQLite in a temporary
folder) and drives them with a real MCP client; these tests assert what it reports per scenario:
outcome, disposition, and executions counted from the ledger file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mcp_approval.demo import parse_only
from mcp_approval.demo.context import METRICS_TOKEN
from tests.support.timing import scaled

pytestmark = pytest.mark.slow

KEYS = ["scenario", "name", "outcome", "disposition", "executions", "detail", "seconds"]

#: scenario → (disposition, executions) every run must report.
EXPECTED: dict[int, tuple[str | None, int]] = {
    1: (None, 1),
    2: ("approved-executed", 1),
    3: ("denied-not-executed", 0),
    4: ("approved-executed", 1),
    5: ("approved-executed", 1),
    6: (None, 0),
    7: ("denied-not-executed", 0),
    8: ("approved-executed", 1),
    9: ("approved-executed", 1),
    10: ("approved-executed", 1),
    11: (None, 2),
    12: ("approved-executed", 1),
    13: ("denied-not-executed", 0),
    14: ("approved-executed", 1),
    15: ("approved-executed", 1),
    16: ("approved-executed", 1),
    17: ("approved-executed", 1),
    18: ("approved-executed", 1),
    19: ("approved-executed", 1),
    20: ("approved-executed", 1),
    21: ("approved-executed", 1),
    22: ("approved-executed", 1),
    23: ("denied-not-executed", 3),
    24: ("approved-executed", 1),
}


def run_demo(
    *args: str, timeout_s: float | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``mcp-approval demo ARGS`` to its end. One that overruns ``timeout_s`` (by default ``scaled(180)``) is
    killed with the servers it started (its process group), so a failed run leaves nothing behind to slow
    the next tests."""
    command = [sys.executable, "-m", "mcp_approval", "demo", *args]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    ) as demo:
        try:
            stdout, stderr = demo.communicate(timeout=scaled(180) if timeout_s is None else timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(demo.pid, signal.SIGKILL)
            demo.communicate()
            raise
    return subprocess.CompletedProcess(command, demo.returncode, stdout, stderr)


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmdline:
                found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def full_run() -> tuple[int, list[dict[str, Any]], str]:
    """One complete ``demo --json`` run shared by the module's tests."""
    completed = run_demo("--json")
    try:
        document = json.loads(completed.stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(
            f"stdout is not JSON ({exc}):\n{completed.stdout[-2000:]}\n{completed.stderr[-2000:]}"
        ) from None
    return completed.returncode, document, completed.stderr


def test_every_scenario_behaves(full_run: tuple[int, list[dict[str, Any]], str]) -> None:
    code, results, stderr = full_run
    failures = [r for r in results if r["outcome"] != "pass"]
    assert not failures, json.dumps(failures, indent=2) + stderr[-2000:]
    assert code == 0
    by_number = {r["scenario"]: r for r in results}
    for number, (disposition, executions) in EXPECTED.items():
        assert by_number[number]["disposition"] == disposition, by_number[number]
        assert by_number[number]["executions"] == executions, by_number[number]


def test_the_json_shape_is_stable(full_run: tuple[int, list[dict[str, Any]], str]) -> None:
    _, results, _ = full_run
    assert [r["scenario"] for r in results] == sorted(r["scenario"] for r in results)
    assert set(EXPECTED) <= {r["scenario"] for r in results}
    for result in results:
        assert list(result) == KEYS
        assert isinstance(result["scenario"], int)
        assert isinstance(result["name"], str)
        assert result["name"]
        assert result["outcome"] in ("pass", "fail")
        assert result["disposition"] is None or isinstance(result["disposition"], str)
        assert isinstance(result["executions"], int)
        assert isinstance(result["detail"], str)
        assert result["detail"]
        assert isinstance(result["seconds"], float)


@pytest.mark.parametrize(
    ("value", "bad"), [("2,x", "x"), ("0", "0"), ("99", "99"), ("2,,8", ""), ("-1", "-1"), ("1.5", "1.5")]
)
def test_parse_only_names_the_bad_part(value: str, bad: str) -> None:
    with pytest.raises(ValueError, match="is not a scenario number; choose from 1, 2, ") as raised:
        parse_only(value)
    assert str(raised.value).startswith(f"{bad!r} is not")


def test_parse_only_reads_a_selection() -> None:
    assert parse_only("2, 8,2") == frozenset({2, 8})
    assert parse_only(None) is None
    assert parse_only(" ") is None


def test_a_bad_only_value_is_a_clear_cli_error() -> None:
    completed = run_demo("--json", "--only", "2,x", timeout_s=scaled(60))
    assert completed.returncode == 2
    assert completed.stdout == ""
    message = " ".join(completed.stderr.split())
    assert "--only" in message
    assert "'x' is not a scenario number" in message


def test_only_runs_the_chosen_scenarios_and_leaves_nothing_behind(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    completed = run_demo("--json", "--only", "9, 1", env=env)
    results = json.loads(completed.stdout)
    assert [r["scenario"] for r in results] == [1, 9], completed.stderr[-2000:]
    assert all(r["outcome"] == "pass" for r in results), results
    assert completed.returncode == 0
    assert processes_mentioning(str(tmp_path)) == []  # every server it started is gone
    assert list(tmp_path.iterdir()) == []  # and so is its temporary folder


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="lists processes through /proc")
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_keep_running_serves_until_stopped_then_cleans_up(tmp_path: Path, stop: signal.Signals) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONFAULTHANDLER": "1"}
    command = [sys.executable, "-m", "mcp_approval", "demo", "--json", "--only", "1", "--keep-running"]
    demo = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert demo.stderr is not None
        guidance = []
        for line in demo.stderr:
            guidance.append(line)
            if "press Ctrl-C" in line:
                break
        text = "".join(guidance)
        assert "/console" in text, text
        assert "mcp-approval review list --config" in text
        assert "carol-token" in text
        assert f"/metrics -H 'authorization: Bearer {METRICS_TOKEN}'" in text
        assert processes_mentioning(str(tmp_path)), "the servers are up while it keeps running"
        (waiting,) = [line for line in guidance if line.startswith("waiting for you:")]
        approval_id = waiting.split()[-1]
        (listing,) = [line for line in guidance if line.startswith("pending approvals:")]
        review = listing.split(":", 1)[1].split()
        assert review[:3] == ["mcp-approval", "review", "list"]
        listed = subprocess.run(
            [sys.executable, "-m", "mcp_approval", *review[1:], "--json"],
            capture_output=True,
            text=True,
            timeout=scaled(60),
            check=False,
        )
        assert listed.returncode == 0, listed.stderr
        assert approval_id in listed.stdout  # the printed command shows the request left for the user
        demo.send_signal(stop)
        try:
            stdout, _ = demo.communicate(timeout=scaled(60))
        except subprocess.TimeoutExpired:  # show where it hangs: faulthandler dumps every thread on SIGABRT
            demo.send_signal(signal.SIGABRT)
            _, threads = demo.communicate(timeout=scaled(10))
            pytest.fail(f"the demo did not stop within 60 s of {stop.name}; its threads:\n{threads[-8000:]}")
    finally:
        if demo.poll() is None:
            demo.kill()
    assert demo.returncode == 0  # the scenarios' verdict, not the signal
    assert [r["scenario"] for r in json.loads(stdout)] == [1]
    deadline = time.monotonic() + scaled(10)
    while processes_mentioning(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_mentioning(str(tmp_path)) == []
    assert list(tmp_path.iterdir()) == []
