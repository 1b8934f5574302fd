"""Expiry, restart, limits and startup checks, each on its own treasury server process.

The lifecycle scenarios run in both modes: ``local`` (the approval backend in ``serve``'s own
database) and ``arap`` (``serve`` with ``HttpPDP`` and the ARAP backend, beside a real
``arap-server`` where reviewers decide). What the MCP client sees is the same.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.arap import ArapServerProcess, arap_deployment
from tests.support.timing import scaled
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
MODES = pytest.mark.parametrize("mode", ["local", "arap"])


@dataclass
class Running:
    """A started deployment: ``serve``, where reviewers decide, and the arap-server (ARAP mode)."""

    server: TreasuryServer
    reviewer_url: str
    ars: ArapServerProcess | None

    def restart_serve(self) -> TreasuryServer:
        """SIGKILL ``serve`` and start it again on the same port (the ARS calls back there)."""
        self.server.kill()
        restarted = TreasuryServer(self.server.directory)
        restarted.port = self.server.port
        self.server = restarted.start()
        return self.server


@asynccontextmanager
async def running(
    mode: str,
    tmp_path: Path,
    overrides: dict[str, dict[str, Any]] | None = None,
    *,
    ars_overrides: dict[str, dict[str, Any]] | None = None,
) -> AsyncIterator[Running]:
    if mode == "local":
        server = TreasuryServer(deployment_dir(tmp_path, overrides)).start()
        deployment = Running(server, server.base_url, None)
    else:
        pair = arap_deployment(tmp_path, overrides, ars_overrides=ars_overrides).start()
        deployment = Running(pair.serve, pair.ars.base_url, pair.ars)
    try:
        yield deployment
    finally:
        deployment.server.kill()
        if deployment.ars is not None:
            deployment.ars.kill()


@MODES
@pytest.mark.sep_check(
    "sep-2848-bounded-pending-window",
    "sep-2848-checks-hold-at-claim",
    "sep-2848-never-executed-and-cancelled",
    "sep-2848-expiry-fences",
)
async def test_unresolved_request_expires_as_denial(mode: str, tmp_path: Path) -> None:
    # Local: the server's pending window; ARAP: the ARS's task.expires_at (the PEP stops polling there).
    # Scaled: the request must still be pending when a busy machine first lists it.
    async with (
        running(
            mode,
            tmp_path,
            {"approval": {"max_pending_s": scaled(1.0)}} if mode == "local" else None,
            ars_overrides={"arap": {"task_lifetime_s": scaled(1.0)}},
        ) as deployment,
        httpx.AsyncClient(base_url=deployment.server.base_url, timeout=scaled(20)) as http,
        httpx.AsyncClient(base_url=deployment.reviewer_url, timeout=scaled(20)) as reviewers,
    ):
        alice = principals(http)["alice"]
        created = (await alice.call_tool("wire_transfer", {"to": "acct-exp", "amount": 30_000})).result
        approval = await approval_for(Reviewer(reviewers, "carol-token"), "wire_transfer", to="acct-exp")
        task = await settled(alice, created["taskId"])
        assert_denied_not_executed(task)
        assert "expired" in text_of(task["result"])
        late = await Reviewer(reviewers, "carol-token").decide(approval["id"], "approve")
        assert late.status_code == 409
        assert (await alice.get(created["taskId"])).result["status"] == "completed"
        assert deployment.server.ledger() == []


@MODES
async def test_pending_task_survives_a_restart(mode: str, tmp_path: Path) -> None:
    async with running(mode, tmp_path) as deployment:
        async with httpx.AsyncClient(base_url=deployment.server.base_url, timeout=scaled(20)) as http:
            created = (
                await principals(http)["alice"].call_tool("wire_transfer", {"to": "acct-r", "amount": 26_000})
            ).result
        restarted = deployment.restart_serve()  # SIGKILL while the approval is pending
        async with (
            httpx.AsyncClient(base_url=restarted.base_url, timeout=scaled(20)) as http,
            httpx.AsyncClient(base_url=deployment.reviewer_url, timeout=scaled(20)) as reviewers,
        ):
            alice = principals(http)["alice"]
            assert (await alice.get(created["taskId"])).result["status"] == "working"
            carol = Reviewer(reviewers, "carol-token")
            approval = await approval_for(carol, "wire_transfer", to="acct-r")
            assert (await carol.decide(approval["id"], "approve")).status_code == 200
            assert_approved_executed(await settled(alice, created["taskId"]))
        assert [entry["to"] for entry in restarted.ledger()] == ["acct-r"]


@MODES
@pytest.mark.sep_check("sep-2848-rate-limit-and-pending-bound")
async def test_submission_rate_and_pending_bounds_answer_non_requestable_denials(mode: str, tmp_path: Path) -> None:
    limits = {"approval": {"submissions_per_minute": 2, "max_pending_per_principal": 5}}
    async with (
        running(mode, tmp_path, limits) as deployment,
        httpx.AsyncClient(base_url=deployment.server.base_url, timeout=scaled(20)) as http,
    ):
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
        assert "in the last minute (at most 2 a minute)" in text_of(limited)  # names the limit it hit
        assert "pending requests" not in text_of(limited)
        bob = principals(http)["bob"]  # the limit is per principal
        assert (await bob.call_tool("wire_transfer", {"to": "acct-rate-b", "amount": 30_000})).result[
            "resultType"
        ] == "task"


@MODES
@pytest.mark.sep_check("sep-2848-rate-limit-and-pending-bound")
async def test_outstanding_pending_tasks_are_bounded(mode: str, tmp_path: Path) -> None:
    async with (
        running(mode, tmp_path, {"approval": {"max_pending_per_principal": 1}}) as deployment,
        httpx.AsyncClient(base_url=deployment.server.base_url, timeout=scaled(20)) as http,
    ):
        alice = principals(http)["alice"]
        first = (await alice.call_tool("wire_transfer", {"to": "acct-b1", "amount": 30_000})).result
        second = (await alice.call_tool("wire_transfer", {"to": "acct-b2", "amount": 30_000})).result
        assert first["resultType"] == "task"
        assert second["isError"] is True
        assert second["_meta"][AUTHORIZATION]["remediation"] == "unavailable"
        assert "waiting for a decision (at most 1 at a time)" in text_of(second)


@MODES
async def test_approval_tasks_count_against_the_task_limits(mode: str, tmp_path: Path) -> None:
    """``[tasks] max_per_principal`` bounds approval tasks too: over it, a final denial and no task."""
    async with (
        running(mode, tmp_path, {"tasks": {"max_per_principal": 1}}) as deployment,
        httpx.AsyncClient(base_url=deployment.server.base_url, timeout=scaled(20)) as http,
    ):
        alice, bob = principals(http)["alice"], principals(http)["bob"]
        first = (await alice.call_tool("wire_transfer", {"to": "acct-l1", "amount": 30_000})).result
        second = (await alice.call_tool("wire_transfer", {"to": "acct-l2", "amount": 30_000})).result
        other = (await bob.call_tool("wire_transfer", {"to": "acct-l3", "amount": 30_000})).result
    assert first["resultType"] == "task"
    assert second.get("resultType") != "task"
    assert second["isError"] is True
    assert second["_meta"][AUTHORIZATION]["remediation"] == "unavailable"
    assert "This caller has too many open tasks (at most 1)" in text_of(second)
    assert other["resultType"] == "task"  # the limit is per caller
    assert "task_limit" in deployment.server.log()  # the WARNING names the limit


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
        timeout=scaled(60),
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
        timeout=scaled(60),
    )
    assert completed.returncode == 2
    assert "approval.max_generations" in completed.stderr
    assert "config.toml" in completed.stderr
