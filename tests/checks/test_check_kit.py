"""``mcp-approval check`` against the treasury example (SQLite, PostgreSQL, bound to the reference ARS),
its command line, and its bad input.

Every server is a real process on 127.0.0.1; the kit decides out of band (``mcp-approval review``
for the treasury, the SEP server's decider otherwise) and counts executions through a witness tool.
A run leaves the reviewers' queue as it found it.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_approval.checks import SCENARIOS
from mcp_approval.hosts import unused_loopback_port
from tests.checks.sep_rig import SepServer, outside
from tests.support.arap import arap_deployment
from tests.support.timing import scaled
from tests.support.treasury import TreasuryServer, deployment_dir

ROOT = Path(__file__).resolve().parents[2]
SETTLE_S = "1"
#: Scenarios the treasury example cannot run: its requests live an hour, the kit cannot change its
#: policy, no approved transfer fails, it sends no client to a URL, and its tokens carry no scopes.
TREASURY_SKIPS = {
    "expired-task-never-executes",
    "policy-rechecked-at-execution",
    "revoked-principal-not-executed",
    "url-remediation",
    "credential-challenge",
    "execution-error-outcome",
}
IN_TASK_INPUT = {"inputs": ["justification"], "collect_inputs": "during"}
BEFORE_TASK_INPUT = {"inputs": ["justification"]}


def treasury_arguments(base_url: str, review_config: Path | None, *extra: str, reviewer: str = "carol") -> list[str]:
    """The kit's command line for a treasury server at ``base_url``, decided by ``review`` on ``review_config``
    (``None``: the decider is among ``extra``)."""
    return [
        f"{base_url}/mcp",
        "--tool", "wire_transfer",
        "--arguments", '{"to": "acct-{nonce}", "amount": 30000}',
        "--changed-arguments", '{"to": "acct-{nonce}", "amount": 40000}',
        "--denied-arguments", '{"to": "acct-{nonce}", "amount": -5}',
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
    return subprocess.run(command, capture_output=True, text=True, timeout=scaled(600), cwd=cwd, check=False)


def pending_requests(config: Path) -> list[dict[str, Any]]:
    """The reviewers' queue: ``mcp-approval review list --json`` on ``config``."""
    command = [sys.executable, "-m", "mcp_approval", "review", "list", "--config", str(config), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=scaled(120), cwd=ROOT, check=True)
    records: list[dict[str, Any]] = json.loads(done.stdout)["approvals"]
    return sorted(records, key=lambda record: str(record["id"]))


def seed_pending_request(base_url: str) -> None:
    """bob's own pending transfer (its input answered, so it is in the queue), which the run must leave."""
    import asyncio

    import httpx

    from mcp_approval.checks.wire import Wire

    def answers(requests: dict[str, Any]) -> dict[str, Any]:
        return {key: {"action": "accept", "content": {"justification": "seeded"}} for key in requests}

    async def call() -> None:
        async with httpx.AsyncClient(base_url=base_url, timeout=scaled(30)) as http:
            bob = Wire(http, token="bob-token")
            arguments = {"to": "acct-seed", "amount": 50000}
            reply = await bob.call_tool("wire_transfer", arguments)
            if reply.result["resultType"] == "input_required":
                asked = reply.result["inputRequests"]
                extra = {"inputResponses": answers(asked), "requestState": reply.result["requestState"]}
                reply = await bob.call("wire_transfer", arguments, extra=extra)
            assert reply.result.get("resultType") == "task", reply.body
            task_id = reply.result["taskId"]
            for _ in range(100):
                task = (await bob.get(task_id)).result
                if task["status"] == "working":
                    return
                if task["status"] == "input_required":
                    assert (await bob.update(task_id, answers(task["inputRequests"]))).has_result
                await asyncio.sleep(0.1)
            raise AssertionError("the seeded call never reached the reviewers")

    asyncio.run(call())


def outcomes_of(report: dict[str, Any]) -> dict[str, str]:
    return {item["scenario"]: item["outcome"] for item in report["scenarios"]}


@pytest.mark.parametrize(
    ("store", "inputs"),
    [("sqlite", IN_TASK_INPUT), pytest.param("postgres", BEFORE_TASK_INPUT, marks=pytest.mark.postgres)],
    ids=["sqlite-in-task-input", "postgres-input-before-task"],
)
def test_the_treasury_example_passes_and_leaves_the_queue_as_found(
    store: str, inputs: dict[str, Any], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Both stores, and both ways of asking for the approvers' input (tasks/update, an MRTR round)."""
    db_url = f"sqlite:///{tmp_path / 'store.db'}" if store == "sqlite" else request.getfixturevalue("postgres_url")
    treasury = {"approvals_required": 1, "reviewer_role": "approver", "approval_valid_s": 3600.0, **inputs}
    directory = deployment_dir(tmp_path, {"store": {"url": db_url}, "templates": {"treasury": treasury}})
    config = directory / "config.toml"
    server = TreasuryServer(directory).start()
    report = tmp_path / "report.json"
    try:
        seed_pending_request(server.base_url)
        queue_before = pending_requests(config)
        done = kit(
            treasury_arguments(
                server.base_url, config, "--expects-input", "--settle", SETTLE_S, "--report", str(report)
            )
        )
        queue_after = pending_requests(config)
        ledger = server.ledger()
    finally:
        server.kill()
    assert done.returncode == 0, done.stdout + done.stderr
    skipped = TREASURY_SKIPS | ({"mrtr-retry-bound"} if inputs is IN_TASK_INPUT else set())
    assert outcomes_of(json.loads(report.read_text())) == {
        s.id: "SKIP" if s.id in skipped else "PASS" for s in SCENARIOS
    }, done.stdout
    assert f"{len(SCENARIOS) - len(skipped)} passed, 0 failed, {len(skipped)} skipped" in done.stdout
    # The run went through the out-of-band reviewer and the input channel, and only approved calls ran.
    assert "mcp-approval review approve apr_" in done.stdout
    assert "mcp-approval review deny apr_" in done.stdout
    assert "input answered through" in done.stdout
    assert "cleanup: nothing the run opened is pending" in done.stdout
    assert [r["id"] for r in queue_after] == [r["id"] for r in queue_before], (queue_before, queue_after)
    assert len(queue_before) == 1
    executed = [entry for entry in ledger if entry.get("op") == "wire_transfer"]
    assert 1 <= len(executed) <= 2, executed  # the approved call, and the cancel race's if the execution won


def test_the_treasury_example_on_an_arap_backend_passes(tmp_path: Path) -> None:
    """``serve`` bound to the reference ARS: the kit decides there (``review`` on its file), the ARS's URL
    never reaches the client, and the ARS's queue is left as found."""
    pair = arap_deployment(tmp_path).start()
    ars_config = pair.directory / "arap-server.toml"
    try:
        seed_pending_request(pair.serve.base_url)
        queue_before = pending_requests(ars_config)
        done = kit(
            treasury_arguments(
                pair.serve.base_url, ars_config, "--artifact", pair.ars_url, "--settle", SETTLE_S, "--json"
            )
        )
        queue_after = pending_requests(ars_config)
    finally:
        pair.kill()
    assert done.returncode == 0, done.stdout + done.stderr
    skipped = TREASURY_SKIPS | {"input-through-task-channel", "mrtr-retry-bound"}  # no input asked
    assert outcomes_of(json.loads(done.stdout)) == {s.id: "SKIP" if s.id in skipped else "PASS" for s in SCENARIOS}
    assert [r["id"] for r in queue_after] == [r["id"] for r in queue_before], (queue_before, queue_after)


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
    skipped = TREASURY_SKIPS | {"input-through-task-channel", "mrtr-retry-bound"}
    assert outcomes_of(json.loads(done.stdout)) == {s.id: "SKIP" if s.id in skipped else "PASS" for s in SCENARIOS}
    assert ledger, "an approved call ran: the kit decided at the service it served"
    with socket.socket() as probe:  # the service ended with the run
        assert probe.connect_ex(("127.0.0.1", pair.ars.port)) != 0


def test_an_expired_request_never_runs_on_the_treasury_example(tmp_path: Path) -> None:
    """Requests capped at 2 s (``max_pending_s``): the task ends as a denial and a late approval runs nothing."""
    directory = deployment_dir(tmp_path, {"approval": {"max_pending_s": 2.0}})
    server = TreasuryServer(directory).start()
    try:
        only = ["--only", "expired-task-never-executes", "--expires-within", "2", "--settle", SETTLE_S]
        done = kit(treasury_arguments(server.base_url, directory / "config.toml", *only))
    finally:
        server.kill()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS expired-task-never-executes" in done.stdout
    assert "disposition denied-not-executed" in done.stdout
    assert server.ledger() == []


def test_a_decision_the_reviewer_may_not_make_fails_the_scenario_that_needs_it(tmp_path: Path) -> None:
    """alice is no approver: review refuses her decision, and the scenario says so (not a hang)."""
    directory = deployment_dir(tmp_path)
    server = TreasuryServer(directory).start()
    try:
        only = ["--only", "approval-executes-at-most-once"]
        done = kit(treasury_arguments(server.base_url, directory / "config.toml", *only, reviewer="alice"))
    finally:
        server.kill()
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL approval-executes-at-most-once" in done.stdout
    assert "why: could not approve out of band: mcp-approval review approve refused the decision" in done.stdout
    assert server.ledger() == []


# -- the command line, against the SEP server -------------------------------------------------------


def sep_arguments(base: str, **changes: str) -> list[str]:
    """The kit's command line for an instance of the SEP server."""
    options = {
        "--tool": "pay",
        "--arguments": '{"to": "acct-{nonce}", "amount": 300}',
        "--changed-arguments": '{"to": "acct-{nonce}", "amount": 900}',
        "--token": "one-token",
        "--other-token": "two-token",
        "--decide": " ".join(outside(base, "decide", "{decision}", "{arguments}", "{reviewer}", "{comment}")),
        "--witness-tool": "ledger",
        "--settle": "0.3",
        "--timeout": "10",
    }
    options.update(changes)
    return [f"{base}/mcp", *[part for pair in options.items() for part in pair], "--expects-input"]


def test_the_command_prints_a_line_per_scenario_and_exits_1_on_a_failure(sep_server: SepServer, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    done = kit([*sep_arguments(sep_server.instance(mutant="runs-twice")), "--report", str(report)])
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line[:5] in ("PASS ", "FAIL ", "SKIP ")]
    assert [line.split()[1] for line in lines] == [scenario.id for scenario in SCENARIOS]
    (at_most_once,) = [scenario for scenario in SCENARIOS if scenario.id == "approval-executes-at-most-once"]
    assert f"FAIL {at_most_once.id} [{', '.join(at_most_once.checks)}]" in lines
    assert "    why: the approved tool ran 2 times, not once" in done.stdout
    document = json.loads(report.read_text())
    assert document["failed"] == 2  # at most once, and the cancel race that lost to the execution
    assert document["cleanup"][-1] == "nothing the run opened is pending"


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
        ({"--decide": "sh -c 'decide {task_id}'"}, "error: --decide: {task_id} must be a word of its own"),
        ({"--decide": "no-such-command-here {decision}"}, "error: --decide failed before the run: decider exited -1"),
        ({"--decide": f"{sys.executable} -c pass"}, "error: --decide failed before the run: it claimed to decide"),
        ({"--witness-tool": "pay"}, "error: --witness-tool failed before the run"),
    ],
    ids=[
        "unknown-tool",
        "refused-token",
        "same-token",
        "bad-json",
        "no-nonce",
        "unknown-witness",
        "value-in-a-shell-string",
        "decider-missing",
        "decider-always-succeeds",
        "witness-fails",
    ],
)
def test_bad_input_is_one_clear_line(sep_server: SepServer, change: dict[str, str], expected: str) -> None:
    base = sep_server.instance()
    done = kit(sep_arguments(base, **change))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith(expected), done.stderr


def test_a_failing_witness_command_or_policy_command_is_bad_input(sep_server: SepServer) -> None:
    base = sep_server.instance()
    for change, expected in (
        ({"--witness-command": f"{sys.executable} -c 'import sys; sys.exit(3)'"}, "error: --witness-command failed"),
        ({"--policy-command": f"{sys.executable} -c 'import sys; sys.exit(4)'"}, "error: --policy-command failed"),
    ):
        arguments = sep_arguments(base, **change)
        if "--witness-command" in change:
            index = arguments.index("--witness-tool")
            del arguments[index : index + 2]
        done = kit(arguments)
        assert done.returncode == 2, done.stdout + done.stderr
        (line,) = done.stderr.splitlines()
        assert line.startswith(expected), line


def test_an_unreachable_server_is_one_clear_line() -> None:
    url = f"http://127.0.0.1:{unused_loopback_port()}"
    done = kit(sep_arguments(url))
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: cannot reach {url}/mcp: ConnectError"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--serve-ars", "missing.toml"], "error: --serve-ars missing.toml: no such file"),
        (["--serve-ars", "pyproject.toml", "--review-config", "pyproject.toml"], "error: --serve-ars decides at"),
    ],
)
def test_a_served_access_request_service_refuses_bad_input_in_one_line(extra: list[str], expected: str) -> None:
    done = kit(treasury_arguments("http://127.0.0.1:9", None, *extra))
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(expected), line


def test_every_scenario_names_statements_of_the_traceability_files() -> None:
    import re

    known = {
        match.group(1)
        for name in ("sep-2848.yaml", "sep-2643.yaml", "sep-2663.yaml")
        for match in re.finditer(r"^  - check: (\S+)$", (ROOT / "conformance" / name).read_text(), re.MULTILINE)
    }
    assert len(known) > 100
    for scenario in SCENARIOS:
        assert scenario.checks, scenario.id
        assert set(scenario.checks) <= known, (scenario.id, set(scenario.checks) - known)
