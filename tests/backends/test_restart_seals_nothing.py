"""A restart gives no authority to a row a database writer unsealed (``serve``, the library server, ``arap-server``).

Each test writes the database the way an attacker with write access but without the binding key
would, while the server is down: the pending request's content seal set to NULL, and with it a
forged unsealed decision, its rules' reviewer role changed, or its approvals required cut (the
status flipped to approved where that is what would make the call run). Then the server starts
again on the same database. A start used to seal such a row as it found it, and the call ran.
Now nothing runs: the ledger is unchanged, the request reads as an integrity failure, the seal
column is still NULL, and the audit log (so ``mcp_approval_integrity_failures``) says so. On
SQLite and PostgreSQL, through real server processes on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_approval.checks.wire import Wire
from mcp_approval.hosts import unused_loopback_port
from mcp_approval.metrics import ApprovalMetrics
from mcp_approval.storage import AuditLog, open_database
from tests.support.arap import arap_deployment
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals, store_rows
from tests.treasury.helpers import approval_for, assert_denied_not_executed, settled, shown

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

NO_SEAL = "the stored request carries no seal"
#: The ERROR line a start writes about them.
UNSEALED_AT_START = "open approval requests without their seals: 1"
LIBRARY = Path(__file__).resolve().parents[2] / "examples" / "library" / "server.py"


# -- what the attacker writes --------------------------------------------------------------------


def now_ms() -> int:
    return int(time.time() * 1000)


def null_seal(store: str, request_id: str) -> None:
    store_rows(store, "UPDATE approval_requests SET content_seal = NULL WHERE request_id = :id", {"id": request_id})


def flip_to_approved(store: str, request_id: str) -> None:
    now = now_ms()
    update = (
        "UPDATE approval_requests SET status = 'approved', decided_at = :now, approved_until = :until, "
        "version = version + 1 WHERE request_id = :id"
    )
    store_rows(store, update, {"now": now, "until": now + 3_600_000, "id": request_id})


def forge_decision(store: str, request_id: str, reviewer: str) -> None:
    insert = (
        "INSERT INTO approval_decisions (request_id, reviewer, decision, comment, decided_at, seal) "
        "VALUES (:id, :reviewer, 'approve', NULL, :now, NULL)"
    )
    store_rows(store, insert, {"id": request_id, "reviewer": reviewer, "now": now_ms()})


def edit_rules(store: str, request_id: str, **changes: Any) -> None:
    """Rewrite the stored rules (canonical JSON, as the backend writes them) and the columns that copy them."""
    ((text,),) = store_rows(
        store, "SELECT rules_json FROM approval_requests WHERE request_id = :id", {"id": request_id}
    )
    rules = {**json.loads(text), **changes}
    update = (
        "UPDATE approval_requests SET rules_json = :rules, reviewer_role = :role, "
        "approvals_required = :required WHERE request_id = :id"
    )
    values = {"role": rules["reviewer_role"], "required": rules["approvals_required"], "id": request_id}
    store_rows(store, update, {**values, "rules": json.dumps(rules, sort_keys=True, separators=(",", ":"))})


def stored_seal(store: str, request_id: str) -> Any:
    ((seal,),) = store_rows(
        store, "SELECT content_seal FROM approval_requests WHERE request_id = :id", {"id": request_id}
    )
    return seal


async def unverified_events(store: str, request_id: str) -> list[tuple[str | None, str]]:
    """``(actor, why)`` of the request's ``approval.unverified`` events (actor ``start``: a start's report)."""
    database = open_database(store)
    try:
        events = await AuditLog(database).events(subject=request_id)
    finally:
        await database.close()
    return [(event.actor, str(event.data["why"])) for event in events if event.kind == "approval.unverified"]


async def integrity_metric(store: str) -> float:
    """``mcp_approval_integrity_failures_total`` as a scrape of this store would show it."""
    database = open_database(store)
    try:
        metrics = ApprovalMetrics(database, AuditLog(database))
        await metrics.refresh()
    finally:
        await database.close()
    return metrics.registry.get_sample_value("mcp_approval_integrity_failures_total") or 0.0


# -- the findings, on serve ----------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """One way to write the database, and how the restarted server must answer it.

    ``attempt``: a reviewer (token) who tries to approve after the restart (refused: 409);
    ``ender``: who denies the request afterwards (``None``: the driver ends the task itself);
    ``viewer``: who reads the request (its rules decide who may).
    """

    requester: str
    tool: str
    arguments: dict[str, Any]
    approvals_before: tuple[str, ...]
    write: Callable[[str, str], None]
    attempt: str | None
    ender: str | None
    viewer: str


def _null_seal(store: str, request_id: str) -> None:
    null_seal(store, request_id)


def _forged_decision(store: str, request_id: str) -> None:
    null_seal(store, request_id)
    forge_decision(store, request_id, "mallory")  # no principal at all, let alone an approver
    flip_to_approved(store, request_id)


def _reviewer_role_dropped(store: str, request_id: str) -> None:
    null_seal(store, request_id)
    edit_rules(store, request_id, reviewer_role="treasurer")  # bob's role: he may not approve treasury transfers


def _approvals_cut(store: str, request_id: str) -> None:
    null_seal(store, request_id)
    edit_rules(store, request_id, approvals_required=1)  # carol's one approval of two would be enough
    flip_to_approved(store, request_id)


TRANSFER = {"to": "acct-attacker", "amount": 950_000}
FINDINGS = {
    "null-seal": Finding(
        "alice", "wire_transfer", TRANSFER, (), _null_seal, "carol-token", "carol-token", "carol-token"
    ),
    "forged-unsealed-decision": Finding(
        "alice", "wire_transfer", TRANSFER, (), _forged_decision, None, None, "carol-token"
    ),
    "reviewer-role-dropped": Finding(
        "alice", "wire_transfer", TRANSFER, (), _reviewer_role_dropped, "bob-token", "bob-token", "bob-token"
    ),
    "approvals-required-cut": Finding(
        "bob", "close_quarter", {"quarter": "2031-Q1"}, ("carol-token",), _approvals_cut, None, None, "dave-token"
    ),
}


async def _refused(http: httpx.AsyncClient, token: str, request_id: str) -> None:
    refused = await Reviewer(http, token).decide(request_id, "approve")
    assert refused.status_code == 409, refused.text
    assert NO_SEAL in refused.text


async def _ended(http: httpx.AsyncClient, finding: Finding, request_id: str, caller: Wire, task_id: str) -> None:
    """The task ends ``denied-not-executed``: by the driver, or after the refused approval, by a denial."""
    if finding.attempt is not None:
        await _refused(http, finding.attempt, request_id)
    if finding.ender is not None:
        denied = await Reviewer(http, finding.ender).decide(request_id, "deny")
        assert denied.status_code == 200, denied.text
    assert_denied_not_executed(await settled(caller, task_id, timeout_s=60))


@pytest.mark.parametrize("name", list(FINDINGS))
async def test_a_serve_restart_gives_no_authority_to_an_unsealed_request(
    name: str, db_url: str, tmp_path: Path
) -> None:
    finding = FINDINGS[name]
    directory = deployment_dir(tmp_path)
    first = TreasuryServer(directory, db_url=db_url).start()
    try:
        async with httpx.AsyncClient(base_url=first.base_url, timeout=20) as http:
            caller = principals(http)[finding.requester]
            task_id = (await caller.call_tool(finding.tool, finding.arguments)).result["taskId"]
            request_id = (await approval_for(Reviewer(http, "dave-token"), finding.tool, **finding.arguments))["id"]
            for token in finding.approvals_before:
                assert (await Reviewer(http, token).decide(request_id, "approve")).status_code == 200
    finally:
        first.kill()
    await asyncio.to_thread(finding.write, db_url, request_id)

    restarted = TreasuryServer(directory, db_url=db_url)
    restarted.log_path = directory / "restarted.log"
    restarted.start()
    try:
        async with httpx.AsyncClient(base_url=restarted.base_url, timeout=20) as http:
            await _ended(http, finding, request_id, principals(http)[finding.requester], task_id)
            record = await shown(http, finding.viewer, request_id)
            assert record.status_code == 200, record.text
            assert record.json()["integrity_failure"] == NO_SEAL
            assert record.json()["arguments"] == {}
    finally:
        restarted.kill()
    assert restarted.ledger() == []
    assert await asyncio.to_thread(stored_seal, db_url, request_id) is None
    assert UNSEALED_AT_START in restarted.log()
    assert ("start", NO_SEAL) in await unverified_events(db_url, request_id)
    assert await integrity_metric(db_url) >= 1


# -- the library server ---------------------------------------------------------------------------


class LibraryServer:
    """``examples/library/server.py`` on a given store, restartable on the same store and key file."""

    def __init__(self, tmp_path: Path, db_url: str) -> None:
        self.tmp_path = tmp_path
        self.db_url = db_url
        self.ledger = tmp_path / "payments.jsonl"
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self) -> LibraryServer:
        self.port = unused_loopback_port()
        command = [sys.executable, str(LIBRARY), "--port", str(self.port), "--db", self.db_url]
        command += ["--ledger", str(self.ledger), "--binding-key-file", str(self.tmp_path / "keys.toml")]
        with (self.tmp_path / "server.log").open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy())
        limit_s = scaled(30)  # a loaded machine imports the library example slowly
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            assert self.process.poll() is None, (self.tmp_path / "server.log").read_text()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"the library example did not listen within {limit_s:.0f} s")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return (self.tmp_path / "server.log").read_text(errors="replace")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(20)

    def payments(self) -> list[dict[str, Any]]:
        if not self.ledger.exists():
            return []
        return [json.loads(line) for line in self.ledger.read_text().splitlines() if line.strip()]


async def test_a_library_server_restart_gives_no_authority_to_a_forged_decision(db_url: str, tmp_path: Path) -> None:
    server = LibraryServer(tmp_path, db_url).start()
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=20) as http:
            task_id = (await Wire(http, token="alice-token").call_tool("pay", {"to": "mallory", "amount": 910})).result[
                "taskId"
            ]
            request_id = (await approval_for(Reviewer(http, "carol-token"), "pay", to="mallory"))["id"]
    finally:
        server.stop()
    await asyncio.to_thread(_forged_decision, db_url, request_id)
    server.start()
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=20) as http:
            alice = Wire(http, token="alice-token")
            assert_denied_not_executed(await settled(alice, task_id, timeout_s=60))
            record = await shown(http, "carol-token", request_id)
            assert record.json()["integrity_failure"] == NO_SEAL, record.text
    finally:
        server.stop()
    assert server.payments() == []
    assert await asyncio.to_thread(stored_seal, db_url, request_id) is None
    assert ("start", NO_SEAL) in await unverified_events(db_url, request_id)  # its log wraps the ERROR line
    assert await integrity_metric(db_url) >= 1


# -- arap-server ----------------------------------------------------------------------------------


async def test_an_arap_server_restart_gives_no_authority_to_a_forged_decision(db_url: str, tmp_path: Path) -> None:
    """The reference ARS keeps its requests in the local backend's tables: its start seals nothing either."""
    pair = arap_deployment(tmp_path, ars_overrides={"store": {"url": db_url}}).start()
    try:
        async with httpx.AsyncClient(base_url=pair.serve.base_url, timeout=20) as http:
            transfer = {"to": "acct-ars", "amount": 940_000}
            task_id = (await principals(http)["alice"].call_tool("wire_transfer", transfer)).result["taskId"]
        async with httpx.AsyncClient(base_url=pair.ars.base_url, timeout=20) as ars:
            request_id = (await approval_for(Reviewer(ars, "carol-token"), "wire_transfer", to="acct-ars"))["id"]
        pair.ars.kill()
        await asyncio.to_thread(_forged_decision, db_url, request_id)
        pair.ars.start()
        async with httpx.AsyncClient(base_url=pair.serve.base_url, timeout=20) as http:
            task = await settled(principals(http)["alice"], task_id, timeout_s=60)
        # The ARS answers the request failed; the PEP ends the call without running it.
        if task["status"] == "completed":
            assert_denied_not_executed(task)
        else:
            assert task["status"] == "failed", task
        async with httpx.AsyncClient(base_url=pair.ars.base_url, timeout=20) as ars:
            record = await shown(ars, "carol-token", request_id)
            assert record.json()["integrity_failure"] == NO_SEAL, record.text
    finally:
        pair.kill()
    assert [entry for entry in pair.serve.ledger() if entry.get("to") == "acct-ars"] == []
    assert await asyncio.to_thread(stored_seal, db_url, request_id) is None
    assert UNSEALED_AT_START in pair.ars.log()
    assert ("start", NO_SEAL) in await unverified_events(db_url, request_id)
