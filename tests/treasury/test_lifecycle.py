"""Expiry, restart, limits and startup checks, each on its own treasury server process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals
from tests.treasury.helpers import (
    AUTHORIZATION,
    approval_for,
    assert_approved_executed,
    assert_denied_not_executed,
    settled,
    text_of,
)

pytestmark = pytest.mark.anyio


@pytest.mark.sep_check(
    "sep-2848-bounded-pending-window",
    "sep-2848-checks-hold-at-claim",
    "sep-2848-never-executed-and-cancelled",
    "sep-2848-expiry-fences",
)
async def test_unresolved_request_expires_as_denial(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path, {"approval": {"max_pending_s": 1.0}})
    server = TreasuryServer(directory).start()
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=20) as http:
            alice = principals(http)["alice"]
            created = (await alice.call_tool("wire_transfer", {"to": "acct-exp", "amount": 30_000})).result
            approval = await approval_for(Reviewer(http, "carol-token"), "wire_transfer", to="acct-exp")
            task = await settled(alice, created["taskId"])
            assert_denied_not_executed(task)
            assert "expired" in text_of(task["result"])
            late = await Reviewer(http, "carol-token").decide(approval["id"], "approve")
            assert late.status_code == 409
            assert (await alice.get(created["taskId"])).result["status"] == "completed"
        assert server.ledger() == []
    finally:
        server.kill()


async def test_pending_task_survives_a_restart(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path)
    server = TreasuryServer(directory).start()
    async with httpx.AsyncClient(base_url=server.base_url, timeout=20) as http:
        created = (
            await principals(http)["alice"].call_tool("wire_transfer", {"to": "acct-r", "amount": 26_000})
        ).result
    server.kill()  # SIGKILL while the approval is pending
    restarted = TreasuryServer(directory).start()
    try:
        async with httpx.AsyncClient(base_url=restarted.base_url, timeout=20) as http:
            alice = principals(http)["alice"]
            assert (await alice.get(created["taskId"])).result["status"] == "working"
            carol = Reviewer(http, "carol-token")
            approval = await approval_for(carol, "wire_transfer", to="acct-r")
            assert (await carol.decide(approval["id"], "approve")).status_code == 200
            assert_approved_executed(await settled(alice, created["taskId"]))
        assert [entry["to"] for entry in restarted.ledger()] == ["acct-r"]
    finally:
        restarted.kill()


@pytest.mark.sep_check("sep-2848-rate-limit-and-pending-bound")
async def test_submission_rate_and_pending_bounds_answer_non_requestable_denials(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path, {"approval": {"submissions_per_minute": 2, "max_pending_per_principal": 5}})
    server = TreasuryServer(directory).start()
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=20) as http:
            alice = principals(http)["alice"]
            answers = [
                (await alice.call_tool("wire_transfer", {"to": f"acct-rate-{n}", "amount": 30_000})).result
                for n in range(3)
            ]
            assert [a.get("resultType") for a in answers[:2]] == ["task", "task"]
            limited = answers[2]
            assert limited["isError"] is True
            assert limited.get("resultType") != "task"
            assert limited["_meta"][AUTHORIZATION]["remediation"] == "unavailable"  # no retry loop invited
            assert "Too many approval requests" in text_of(limited)
            bob = principals(http)["bob"]  # the limit is per principal
            assert (await bob.call_tool("wire_transfer", {"to": "acct-rate-b", "amount": 30_000})).result[
                "resultType"
            ] == "task"
    finally:
        server.kill()


@pytest.mark.sep_check("sep-2848-rate-limit-and-pending-bound")
async def test_outstanding_pending_tasks_are_bounded(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path, {"approval": {"max_pending_per_principal": 1}})
    server = TreasuryServer(directory).start()
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=20) as http:
            alice = principals(http)["alice"]
            first = (await alice.call_tool("wire_transfer", {"to": "acct-b1", "amount": 30_000})).result
            second = (await alice.call_tool("wire_transfer", {"to": "acct-b2", "amount": 30_000})).result
            assert first["resultType"] == "task"
            assert second["isError"] is True
            assert second["_meta"][AUTHORIZATION]["remediation"] == "unavailable"
    finally:
        server.kill()


def test_serve_refuses_to_start_without_a_binding_key_outside_dev_mode(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path, {"server": {"dev_mode": False}, "approval": {"binding_keys": {}}})
    config = directory / "config.toml"
    text = config.read_text()
    # Static principals need dev mode, so drop them to reach the key check.
    config.write_text(text.split("\n[[principals]]")[0] + "\n")
    completed = subprocess.run(
        [sys.executable, "-m", "mcp_approval", "serve", "--config", str(config), "--port", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 2
    assert "approval.binding_keys" in completed.stderr
    assert str(config) in completed.stderr


def test_serve_names_the_file_and_field_of_a_bad_config(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path, {"approval": {"max_generations": 0}})
    completed = subprocess.run(
        [sys.executable, "-m", "mcp_approval", "serve", "--config", str(directory / "config.toml"), "--port", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 2
    assert "approval.max_generations" in completed.stderr
    assert "config.toml" in completed.stderr
