"""``mcp-approval check`` can fail: it passes on the treasury example and on a faithful fixture
server, and each fixture server that breaks one SEP-2848 statement fails exactly that scenario.

Every server is a real process on 127.0.0.1; the kit decides out of band (``mcp-approval review``
for the treasury, the fixture's own decider otherwise) and counts executions through a witness tool.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_approval.checks import SCENARIOS, CheckOptions, run_checks
from mcp_approval.hosts import unused_loopback_port
from tests.checks.fixture_server import EXPIRY_FLAW, FLAWS
from tests.support import forkserver
from tests.support.arap import arap_deployment
from tests.support.timing import scaled
from tests.support.treasury import TreasuryServer, deployment_dir

ROOT = Path(__file__).resolve().parents[2]
DECIDER = Path(__file__).with_name("fixture_decide.py")
#: The kit's settle window in CI: long enough for a flawed fixture (which acts at once) to show.
SETTLE_S = "1"
#: Scenarios that skip unless the server offers what they need (a listen stream, expiring requests).
NOT_OFFERED = ("task-notifications", "expired-task-never-executes")


class Fixture:
    """``python -m tests.checks.fixture_server`` with one flaw, on a free port."""

    def __init__(self, flaw: str, log_path: Path, *extra: str) -> None:
        self.port = unused_loopback_port()
        self.process = forkserver.start_module(
            ["tests.checks.fixture_server", "--port", str(self.port), "--flaw", flaw, *extra],
            env=dict(os.environ),
            log_path=log_path,
        )
        self.log_path = log_path
        deadline = time.monotonic() + scaled(60)
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"fixture server exited: {log_path.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"fixture server did not listen: {log_path.read_text()[-2000:]}") from None
                time.sleep(0.05)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(scaled(10))


def fixture_arguments(base_url: str, **changes: str) -> list[str]:
    """The kit's command line for a fixture server at ``base_url``."""
    options = {
        "--tool": "pay",
        "--arguments": '{"to": "acct-{nonce}", "amount": 300}',
        "--changed-arguments": '{"to": "acct-{nonce}", "amount": 900}',
        "--token": "one-token",
        "--other-token": "two-token",
        "--decide": f"{sys.executable} {DECIDER} {base_url} {{decision}} {{arguments}}",
        "--witness-tool": "ledger",
        "--settle": SETTLE_S,
    }
    options.update(changes)
    return [f"{base_url}/mcp", *[part for pair in options.items() for part in pair], "--expects-input"]


def treasury_arguments(base_url: str, review_config: Path | None, *extra: str, reviewer: str = "carol") -> list[str]:
    """The kit's command line for a treasury server at ``base_url``, decided by ``review`` on ``review_config``
    (``None``: the decider is among ``extra``)."""
    return [
        f"{base_url}/mcp",
        "--tool", "wire_transfer",
        "--arguments", '{"to": "acct-{nonce}", "amount": 30000}',
        "--changed-arguments", '{"to": "acct-{nonce}", "amount": 40000}',
        "--token", "alice-token",
        "--other-token", "bob-token",
        *(["--review-config", str(review_config)] if review_config is not None else []),
        "--reviewer", reviewer,
        "--witness-tool", "ledger",
        *extra,
    ]  # fmt: skip


def kit(arguments: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``mcp-approval check ARGUMENTS`` as a subprocess."""
    command = [sys.executable, "-m", "mcp_approval", "check", *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=scaled(300), cwd=cwd, check=False)


@pytest.fixture(scope="module")
def faithful(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fixture]:
    """The fixture server without a flaw, shared by the bad-input tests."""
    server = Fixture("none", tmp_path_factory.mktemp("fixture") / "server.log")
    try:
        yield server
    finally:
        server.kill()


@pytest.mark.parametrize("flaw", sorted(FLAWS))
def test_each_fixture_fails_exactly_the_scenario_it_breaks(flaw: str, tmp_path: Path) -> None:
    server = Fixture(flaw, tmp_path / "server.log")
    try:
        options = CheckOptions(
            url=f"{server.base_url}/mcp",
            tool="pay",
            arguments={"to": "acct-{nonce}", "amount": 300},
            changed_arguments={"to": "acct-{nonce}", "amount": 900},
            token="one-token",
            other_token="two-token",
            decide_command=[sys.executable, str(DECIDER), server.base_url, "{decision}", "{arguments}"],
            witness_tool="ledger",
            expects_input=True,
            settle_s=float(SETTLE_S),
        )
        results = asyncio.run(run_checks(options))
    finally:
        server.kill()
    failed = {result.scenario for result in results if result.outcome == "FAIL"}
    shown = "\n".join(f"{r.outcome} {r.scenario}: {r.detail}" for r in results)
    assert failed == ({FLAWS[flaw]} if FLAWS[flaw] else set()), shown
    assert [r.scenario for r in results] == [scenario.id for scenario in SCENARIOS]
    outcomes = {r.scenario: r.outcome for r in results}
    # The fixture offers no subscriptions/listen, and its requests do not expire.
    assert [outcomes[scenario] for scenario in NOT_OFFERED] == ["SKIP", "SKIP"], shown
    if flaw != "executes-early":  # its failure is every later scenario's precondition: they skip
        assert {outcome for scenario, outcome in outcomes.items() if scenario not in NOT_OFFERED} <= {
            "PASS",
            "FAIL",
        }, shown


IN_TASK_INPUT = {"inputs": ["justification"], "collect_inputs": "during"}
BEFORE_TASK_INPUT = {"inputs": ["justification"]}


@pytest.mark.parametrize(
    ("store", "inputs"),
    [("sqlite", IN_TASK_INPUT), pytest.param("postgres", BEFORE_TASK_INPUT, marks=pytest.mark.postgres)],
    ids=["sqlite-in-task-input", "postgres-input-before-task"],
)
def test_the_treasury_example_passes_every_scenario(
    store: str, inputs: dict[str, Any], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Both stores, and both ways of asking for the approvers' input (tasks/update, an MRTR round)."""
    db_url = f"sqlite:///{tmp_path / 'store.db'}" if store == "sqlite" else request.getfixturevalue("postgres_url")
    treasury = {"approvals_required": 1, "reviewer_role": "approver", "approval_valid_s": 3600.0, **inputs}
    directory = deployment_dir(tmp_path, {"store": {"url": db_url}, "templates": {"treasury": treasury}})
    server = TreasuryServer(directory).start()
    report = tmp_path / "report.json"
    try:
        done = kit(
            treasury_arguments(
                server.base_url,
                directory / "config.toml",
                "--expects-input",
                "--settle",
                SETTLE_S,
                "--report",
                str(report),
            )
        )
    finally:
        server.kill()
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(report.read_text())
    outcomes = {item["scenario"]: item["outcome"] for item in document["scenarios"]}
    expired = "expired-task-never-executes"  # its own test: requests expire within seconds there
    assert outcomes == {s.id: "SKIP" if s.id == expired else "PASS" for s in SCENARIOS}, done.stdout
    assert f"{len(SCENARIOS) - 1} passed, 0 failed, 1 skipped" in done.stdout
    # The run really went through the out-of-band reviewer and the input channel.
    assert "mcp-approval review approve apr_" in done.stdout
    assert "mcp-approval review deny apr_" in done.stdout
    assert "input answered through" in done.stdout
    executed = [entry for entry in server.ledger() if entry.get("op") == "wire_transfer"]
    assert len(executed) == 1, executed  # only the approved call ran, once


def test_the_command_prints_a_line_per_scenario_and_exits_1_on_a_failure(tmp_path: Path) -> None:
    server = Fixture("runs-twice", tmp_path / "server.log")
    report = tmp_path / "report.json"
    try:
        done = kit([*fixture_arguments(server.base_url), "--report", str(report)])
    finally:
        server.kill()
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line[:5] in ("PASS ", "FAIL ", "SKIP ")]
    assert len(lines) == len(SCENARIOS)
    (at_most_once,) = [scenario for scenario in SCENARIOS if scenario.id == "approval-executes-at-most-once"]
    assert lines[SCENARIOS.index(at_most_once)] == f"FAIL {at_most_once.id} [{', '.join(at_most_once.checks)}]"
    assert "why: the approved tool ran 2 times, not once" in done.stdout
    document = json.loads(report.read_text())
    # One failed; the scenarios the fixture does not offer skipped.
    assert (document["passed"], document["failed"], document["skipped"]) == (len(SCENARIOS) - 3, 1, 2)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"--tool": "no_such_tool"},
            "error: --tool 'no_such_tool' is not a tool of the server (it lists: ledger, pay)",
        ),
        ({"--token": "wrong-token"}, "error: the server refused --token (HTTP 401"),
        ({"--other-token": "one-token"}, "error: --token and --other-token must be two principals' tokens"),
        ({"--arguments": "{not json"}, "error: --arguments is not JSON"),
        ({"--arguments": '{"to": "acct", "amount": 300}'}, "error: --arguments must contain {nonce}"),
        ({"--witness-tool": "nothing"}, "error: --witness-tool 'nothing' is not a tool of the server"),
    ],
    ids=["unknown-tool", "refused-token", "same-token", "bad-json", "no-nonce", "unknown-witness"],
)
def test_bad_input_is_one_clear_line(faithful: Fixture, change: dict[str, str], expected: str) -> None:
    done = kit(fixture_arguments(faithful.base_url, **change))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith(expected), done.stderr


def test_an_unreachable_server_is_one_clear_line() -> None:
    url = f"http://127.0.0.1:{unused_loopback_port()}"
    done = kit(fixture_arguments(url))
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: cannot reach {url}/mcp: ConnectError"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_every_scenario_names_statements_of_the_traceability_files() -> None:
    known = {
        match.group(1)
        for name in ("sep-2848.yaml", "sep-2643.yaml", "sep-2663.yaml")
        for match in re.finditer(r"^  - check: (\S+)$", (ROOT / "conformance" / name).read_text(), re.MULTILINE)
    }
    assert len(known) > 100
    for scenario in SCENARIOS:
        assert scenario.checks, scenario.id
        assert set(scenario.checks) <= known, (scenario.id, set(scenario.checks) - known)


def test_the_treasury_example_on_an_arap_backend_passes(tmp_path: Path) -> None:
    """``serve`` bound to the reference ARS: the kit decides there (``review`` on its file) and the
    ARS's URL must never reach the client."""
    pair = arap_deployment(tmp_path).start()
    try:
        done = kit(
            treasury_arguments(
                pair.serve.base_url,
                pair.directory / "arap-server.toml",
                "--artifact",
                pair.ars_url,
                "--settle",
                SETTLE_S,
                "--json",
            )
        )
    finally:
        pair.kill()
    assert done.returncode == 0, done.stdout + done.stderr
    outcomes = {item["scenario"]: item["outcome"] for item in json.loads(done.stdout)["scenarios"]}
    skipped = {"input-through-task-channel", "expired-task-never-executes"}  # no input asked, no short deadline
    assert outcomes == {s.id: "SKIP" if s.id in skipped else "PASS" for s in SCENARIOS}, done.stdout


def test_the_kit_serves_the_access_request_service_an_arap_bound_server_submits_to(tmp_path: Path) -> None:
    """``serve`` bound to ARAP, its PDP's port free: with ``--serve-ars`` the kit runs the reference PDP + ARS
    there for the run, decides at it, and checks its URL never reaches the client."""
    pair = arap_deployment(tmp_path)
    pair.serve.start()  # discovers the ARS when it first needs it: nothing listens there yet
    try:
        ars = ["--serve-ars", str(pair.directory / "arap-server.toml"), "--ars-port", str(pair.ars.port)]
        done = kit(treasury_arguments(pair.serve.base_url, None, *ars, "--settle", SETTLE_S, "--json"))
        ledger = pair.serve.ledger()
    finally:
        pair.serve.kill()
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    outcomes = {item["scenario"]: item["outcome"] for item in document["scenarios"]}
    skipped = {"input-through-task-channel", "expired-task-never-executes"}  # no input asked, no short deadline
    assert outcomes == {s.id: "SKIP" if s.id in skipped else "PASS" for s in SCENARIOS}, done.stdout
    assert ledger, "an approved call ran: the kit decided at the service it served"
    with socket.socket() as probe:  # the service ended with the run
        assert probe.connect_ex(("127.0.0.1", pair.ars.port)) != 0


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--serve-ars", "missing.toml"], "error: --serve-ars missing.toml: no such file"),
        (["--serve-ars", "pyproject.toml", "--review-config", "pyproject.toml"], "error: --serve-ars decides at"),
    ],
)
def test_a_served_access_request_service_refuses_bad_input_in_one_line(
    faithful: Fixture, extra: list[str], expected: str
) -> None:
    done = kit(treasury_arguments(faithful.base_url, None, *extra))
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(expected), line


def test_a_decision_the_reviewer_may_not_make_fails_the_scenario_that_needs_it(tmp_path: Path) -> None:
    """alice is no approver: review refuses her decision, and the scenario says so (not a hang)."""
    directory = deployment_dir(tmp_path)
    server = TreasuryServer(directory).start()
    try:
        done = kit(
            treasury_arguments(
                server.base_url, directory / "config.toml", "--only", "approval-executes-at-most-once", reviewer="alice"
            )
        )
    finally:
        server.kill()
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL approval-executes-at-most-once" in done.stdout
    assert "why: could not approve out of band: mcp-approval review approve refused the decision" in done.stdout
    (reason,) = done.stderr.splitlines()  # review's own reason, once: a refusal is not tried again
    assert reason.startswith("error: "), done.stderr
    assert server.ledger() == []


def test_an_expired_request_never_runs_on_the_treasury_example(tmp_path: Path) -> None:
    """Requests capped at 2 s (``max_pending_s``): the task ends as a denial and a late approval runs nothing."""
    directory = deployment_dir(tmp_path, {"approval": {"max_pending_s": 2.0}})
    server = TreasuryServer(directory).start()
    try:
        done = kit(
            treasury_arguments(
                server.base_url,
                directory / "config.toml",
                "--only",
                "expired-task-never-executes",
                "--expires-within",
                "2",
                "--settle",
                SETTLE_S,
            )
        )
    finally:
        server.kill()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS expired-task-never-executes" in done.stdout
    assert "disposition denied-not-executed" in done.stdout
    assert server.ledger() == []


@pytest.mark.parametrize("flaw", ["none", EXPIRY_FLAW])
def test_the_expiry_scenario_fails_on_a_server_that_runs_a_lapsed_request(flaw: str, tmp_path: Path) -> None:
    server = Fixture(flaw, tmp_path / "server.log", "--expire-s", "1")
    try:
        done = kit(
            [*fixture_arguments(server.base_url), "--only", "expired-task-never-executes", "--expires-within", "1"]
        )
    finally:
        server.kill()
    expected = "FAIL" if flaw == EXPIRY_FLAW else "PASS"
    assert f"{expected} expired-task-never-executes" in done.stdout, done.stdout + done.stderr
    assert done.returncode == (1 if flaw == EXPIRY_FLAW else 0)
