"""Someone who can write the database cannot make a call run that no reviewer approved.

Each test writes the database the way an attacker would, between the call and the decision: it
swaps two pending calls' links to their requests, flips a request's status, forges or copies a
decision row. What a reviewer approves is what runs, or nothing runs: the task ends
``denied-not-executed`` with the integrity failure in its audit event, reviewers see the failure
on the request, and the metric counts it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, select, update

from mcp_approval.approval.messages import INTEGRITY_FAILED
from mcp_approval.approval.persistence.schema import approval_intents_table, approval_workflows_table
from mcp_approval.backends.local.schema import approval_decisions_table, approval_requests_table
from mcp_approval.metrics import ApprovalMetrics
from tests.approval.inprocess import Harness, inprocess_treasury
from tests.support.timing import scaled
from tests.treasury.helpers import approval_for, assert_denied_not_executed, settled

pytestmark = pytest.mark.anyio

_W, _I = approval_workflows_table, approval_intents_table
_R, _D = approval_requests_table, approval_decisions_table


async def gated(harness: Harness, to: str, amount: int) -> tuple[str, dict[str, Any]]:
    """A transfer that needs one approver: its task id and its pending request as carol sees it."""
    task_id = (await harness.alice.call_tool("wire_transfer", {"to": to, "amount": amount})).result["taskId"]
    return str(task_id), await approval_for(harness.reviewer("carol"), "wire_transfer", to=to)


async def write(harness: Harness, *statements: Any) -> None:
    def run(conn: Connection) -> None:
        for statement in statements:
            conn.execute(statement)

    await harness.deployment.approval.store.database.write(run)


async def shown(harness: Harness, request_id: str) -> dict[str, Any]:
    carol = harness.reviewer("carol")
    response = await harness.http.get(f"/approvals/{request_id}", headers=carol.headers)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def integrity_events(harness: Harness, task_id: str) -> list[str]:
    events = await harness.deployment.audit.events(subject=task_id)
    return [str(e.data["integrity_failure"]) for e in events if "integrity_failure" in e.data]


async def integrity_metric(harness: Harness) -> float:
    metrics = ApprovalMetrics(harness.deployment.approval.store.database, harness.deployment.audit)
    await metrics.refresh()
    value = metrics.registry.get_sample_value("mcp_approval_integrity_failures_total")
    return 0.0 if value is None else value


async def test_approving_b_never_runs_a_after_their_links_were_swapped(tmp_path: Path, db_url: str) -> None:
    """Finding 1: A ($990,000 to an attacker) and B ($26,000 to payroll) pending; the handles of their
    workflows and intents are swapped; carol approves B, as shown to her."""
    async with inprocess_treasury(tmp_path, {"store": {"url": db_url}}) as harness:
        task_a, request_a = await gated(harness, "acct-attacker", 990_000)
        task_b, request_b = await gated(harness, "acct-payroll", 26_000)
        await write(
            harness,
            update(_W).where(_W.c.task_id == task_a).values(handle=request_b["id"]),
            update(_W).where(_W.c.task_id == task_b).values(handle=request_a["id"]),
            update(_I).where(_I.c.task_id == task_a).values(handle=request_b["id"]),
            update(_I).where(_I.c.task_id == task_b).values(handle=request_a["id"]),
        )
        assert (await shown(harness, request_b["id"]))["integrity_failure"] is None  # B itself is intact
        assert (await harness.reviewer("carol").decide(request_b["id"], "approve")).status_code == 200
        task = await settled(harness.alice, task_a, timeout_s=scaled(30))
        assert_denied_not_executed(task)
        assert INTEGRITY_FAILED in task["result"]["content"][0]["text"]
        assert harness.ledger() == []
        assert await integrity_events(harness, task_a) == [
            "the approval request the task follows is for another call than the task's"
        ]
        # What reviewers see of B: approved, and its call not run, for that reason.
        outcome = (await shown(harness, request_b["id"]))["outcome"]
        assert outcome["state"] == "denied-not-executed"
        assert outcome["reason"] == INTEGRITY_FAILED
        # Approving A (the request B's task now follows) does not run B either.
        assert (await harness.reviewer("carol").decide(request_a["id"], "approve")).status_code == 200
        assert_denied_not_executed(await settled(harness.alice, task_b, timeout_s=scaled(30)))
        assert harness.ledger() == []
        assert await integrity_metric(harness) == 2
        assert (await harness.deployment.audit.verify()).ok


async def test_a_status_flipped_to_approved_without_a_decision_runs_nothing(tmp_path: Path, db_url: str) -> None:
    """Finding 2: the pending request's status, decision time, expiry and version written as approved."""
    async with inprocess_treasury(tmp_path, {"store": {"url": db_url}}) as harness:
        task_id, approval = await gated(harness, "acct-flipped", 27_000)
        now = harness.deployment.approval.store.clock.now_ms()
        flip = update(_R).where(_R.c.request_id == approval["id"])
        await write(harness, flip.values(status="approved", decided_at=now, approved_until=now + 3_600_000, version=7))
        assert_denied_not_executed(await settled(harness.alice, task_id, timeout_s=scaled(30)))
        assert harness.ledger() == []
        why = "the request is marked approved, but its decisions do not approve it under its rules"
        assert await integrity_events(harness, task_id) == [why]
        assert (await shown(harness, approval["id"]))["integrity_failure"] == why
        assert await integrity_metric(harness) == 1


async def forged_decision(request_id: str, reviewer: str, at: int, seal: str | None = None) -> Any:
    values = {"request_id": request_id, "reviewer": reviewer, "decision": "approve", "comment": None}
    return _D.insert().values(**values, decided_at=at, seal=seal)


async def test_a_forged_decision_row_approves_nothing(tmp_path: Path, db_url: str) -> None:
    """A decision row written without the key, with the status flipped to match: nothing runs."""
    async with inprocess_treasury(tmp_path, {"store": {"url": db_url}}) as harness:
        task_id, approval = await gated(harness, "acct-forged", 28_000)
        now = harness.deployment.approval.store.clock.now_ms()
        flip = update(_R).where(_R.c.request_id == approval["id"])
        await write(
            harness,
            await forged_decision(approval["id"], "carol", now),
            flip.values(status="approved", decided_at=now, approved_until=now + 3_600_000, version=1),
        )
        assert_denied_not_executed(await settled(harness.alice, task_id, timeout_s=scaled(30)))
        assert harness.ledger() == []
        assert await integrity_events(harness, task_id) == ["the decision of carol carries no seal"]
        assert (await shown(harness, approval["id"]))["integrity_failure"] == "the decision of carol carries no seal"


async def test_a_decision_copied_from_another_request_does_not_count(tmp_path: Path, db_url: str) -> None:
    """carol's genuine, sealed approval of one request, copied to another (seal and all)."""
    async with inprocess_treasury(tmp_path, {"store": {"url": db_url}}) as harness:
        _, decided = await gated(harness, "acct-decided", 29_000)
        task_id, target = await gated(harness, "acct-target", 30_000)
        assert (await harness.reviewer("carol").decide(decided["id"], "deny")).status_code == 200

        def copied(conn: Connection) -> None:
            row = conn.execute(select(_D).where(_D.c.request_id == decided["id"])).mappings().one()
            conn.execute(_D.insert().values({**row, "request_id": target["id"], "decision": "approve"}))

        await harness.deployment.approval.store.database.write(copied)
        # Pending, with a decision that does not authenticate: nobody may approve it now.
        assert (await shown(harness, target["id"]))[
            "integrity_failure"
        ] == "the decision of carol does not authenticate"
        refused = await harness.reviewer("carol").decide(target["id"], "approve")
        assert refused.status_code == 409
        assert "cannot be approved" in refused.json()["detail"]
        now = harness.deployment.approval.store.clock.now_ms()
        flip = update(_R).where(_R.c.request_id == target["id"])
        await write(harness, flip.values(status="approved", decided_at=now, approved_until=now + 3_600_000))
        assert_denied_not_executed(await settled(harness.alice, task_id, timeout_s=scaled(30)))
        assert harness.ledger() == []
