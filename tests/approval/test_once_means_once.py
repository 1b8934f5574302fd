"""An approved call runs once, even when someone who can write the database rolls it back.

Each test lets an approved transfer run, then writes the database the way an attacker would: rolls
the finished workflow (and its task) back to pending, or points a later identical call's task at
the request that already ran and deletes its intent row. The call's sealed execution record stops
the second run: the task ends ``denied-not-executed`` as an integrity failure, told as the others
are (its audit event and the metric), and the ledger holds one transfer.
"""

from __future__ import annotations

import base64
import json
import re
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import Connection, delete, select, update
from typer.testing import CliRunner

from mcp_approval.approval.messages import INTEGRITY_FAILED
from mcp_approval.approval.persistence.schema import approval_intents_table, approval_workflows_table
from mcp_approval.cli.main import app
from mcp_approval.tasks.schema import tasks_table
from tests.approval.inprocess import Harness, inprocess_treasury
from tests.approval.test_sealed_authority import gated, integrity_events, integrity_metric, write
from tests.support.polling import eventually
from tests.support.timing import scaled
from tests.treasury.helpers import assert_approved_executed, assert_denied_not_executed, settled

pytestmark = pytest.mark.anyio

_W, _I, _T = approval_workflows_table, approval_intents_table, tasks_table


async def ran(harness: Harness, to: str, amount: int) -> tuple[str, dict[str, Any]]:
    """A transfer carol approved and that ran: its task id and its request."""
    task_id, approval = await gated(harness, to, amount)
    assert (await harness.reviewer("carol").decide(approval["id"], "approve")).status_code == 200
    assert_approved_executed(await settled(harness.alice, task_id, timeout_s=scaled(30)))
    return task_id, approval


async def parked(harness: Harness, task_id: str) -> None:
    """Wait until the driver has left ``task_id``'s workflow for later (no lease, its next look ahead).

    Written before that, the driver's own rescheduling of the pass it is in the middle of could
    overwrite the edit's ``next_check_at`` with its pending-poll interval, and the test would wait for
    a look that comes long after its limit.
    """

    def state(conn: Connection) -> Any:
        return conn.execute(select(_W.c.lease_owner, _W.c.next_check_at).where(_W.c.task_id == task_id)).one()

    def left_for_later(row: Any) -> bool:
        return row.lease_owner is None and row.next_check_at > time.time() * 1000

    await eventually(
        lambda: harness.deployment.approval.store.database.read(state), left_for_later, timeout_s=scaled(30)
    )


def rolled_back(task_id: str) -> list[Any]:
    """The statements that make a finished call look pending again: its workflow and its task."""
    return [
        update(_W)
        .where(_W.c.task_id == task_id)
        .values(phase="pending", disposition=None, lease_owner=None, lease_expires_at=None, next_check_at=0),
        update(_T).where(_T.c.task_id == task_id).values(status="working", result_json=None, status_message=None),
    ]


async def test_a_finished_call_rolled_back_to_pending_does_not_run_again(tmp_path: Path, db_url: str) -> None:
    """Finding 2: the finished workflow and its task written back to pending; the request is still approved."""
    async with inprocess_treasury(tmp_path, {"store": {"url": db_url}}) as harness:
        task_id, approval = await ran(harness, "acct-rollback", 31_000)
        assert len(harness.ledger()) == 1
        await write(harness, *rolled_back(task_id))
        task = await settled(harness.alice, task_id, timeout_s=scaled(30))
        assert_denied_not_executed(task)
        assert INTEGRITY_FAILED in task["result"]["content"][0]["text"]
        assert len(harness.ledger()) == 1
        why = f"the approved call of task {task_id} generation 1 (request {approval['id']}) already ran"
        assert await integrity_events(harness, task_id) == [why]
        assert await integrity_metric(harness) == 1


async def test_a_later_call_pointed_at_the_executed_request_does_not_run(tmp_path: Path, db_url: str) -> None:
    """Finding 2: a later identical call's task follows the request that ran; its intent row deleted."""
    async with inprocess_treasury(tmp_path, {"store": {"url": db_url}}) as harness:
        _, first = await ran(harness, "acct-twice", 32_000)
        later, _ = await gated(harness, "acct-twice", 32_000)
        await parked(harness, later)
        await write(
            harness,
            update(_W).where(_W.c.task_id == later).values(handle=first["id"], next_check_at=0),
            delete(_I).where(_I.c.task_id == later),
        )
        assert_denied_not_executed(await settled(harness.alice, later, timeout_s=scaled(30)))
        assert len(harness.ledger()) == 1
        events = await integrity_events(harness, later)
        assert events == [f"the approved call of task {later} generation 1 (request {first['id']}) already ran"]
        assert await integrity_metric(harness) == 1


async def test_the_execution_record_is_written_before_the_call_runs(tmp_path: Path, db_url: str) -> None:
    """One sealed record per execution, naming the task's generation and its request."""
    async with inprocess_treasury(tmp_path, {"store": {"url": db_url}}) as harness:
        task_id, approval = await ran(harness, "acct-record", 33_000)
        # Imported here so the tests above also run (and fail) against a schema without the table.
        from mcp_approval.approval.persistence.schema import approval_executions_table

        def rows(conn: Connection) -> list[Any]:
            return list(conn.execute(approval_executions_table.select()).mappings())

        stored = await harness.deployment.approval.store.database.read(rows)
        assert [(row["task_id"], row["generation"], row["handle"]) for row in stored] == [(task_id, 1, approval["id"])]
        assert stored[0]["seal"], "sealed under the binding key"


def audit_verify(harness: Harness) -> tuple[int, dict[str, Any]]:
    """``mcp-approval audit verify --config`` of the deployment (its store and binding keys), as JSON."""
    result = CliRunner().invoke(app, ["audit", "verify", "--config", str(harness.directory / "config.toml"), "--json"])
    return result.exit_code, json.loads(result.stdout)


async def verified(harness: Harness) -> tuple[int, dict[str, Any]]:
    return await anyio.to_thread.run_sync(audit_verify, harness)


async def test_audit_verify_names_a_request_executed_twice(tmp_path: Path, db_url: str) -> None:
    """What remains: rolled back with its execution record deleted too, the call runs again; verify says so."""
    async with inprocess_treasury(tmp_path, {"store": {"url": db_url}}) as harness:
        task_id, approval = await ran(harness, "acct-again", 34_000)
        code, intact = await verified(harness)
        assert (code, intact["ok"], intact["executions"]) == (0, True, {"ok": True, "findings": []})
        from mcp_approval.approval.persistence.schema import approval_executions_table

        await write(harness, delete(approval_executions_table), *rolled_back(task_id))
        assert_approved_executed(await settled(harness.alice, task_id, timeout_s=scaled(30)))
        assert len(harness.ledger()) == 2  # a writer who deletes the record too is not stopped, but named
        code, found = await verified(harness)
        assert code == 1
        assert found["ok"] is False
        assert found["broken"] is None, "the chain itself holds"
        lines = found["executions"]["findings"]
        assert any(line.startswith(f"request {approval['id']} (local) executed 2 times") for line in lines), lines
        assert any(line.startswith(f"task {task_id} generation 1 executed 2 times") for line in lines), lines


async def test_audit_verify_names_an_execution_without_its_record_or_a_sealed_approval(
    tmp_path: Path, db_url: str
) -> None:
    """The execution record deleted and the approving decision removed after the call ran."""
    async with inprocess_treasury(tmp_path, {"store": {"url": db_url}}) as harness:
        task_id, approval = await ran(harness, "acct-unapproved", 35_000)
        from mcp_approval.approval.persistence.schema import approval_executions_table
        from mcp_approval.backends.local.schema import approval_decisions_table

        await write(harness, delete(approval_executions_table), delete(approval_decisions_table))
        code, found = await verified(harness)
        assert code == 1
        missing, unapproved = found["executions"]["findings"]
        assert re.fullmatch(
            f"task {task_id} generation 1 was claimed to run \\(event \\d+\\) but has no sealed execution record",
            missing,
        ), missing
        assert unapproved == (
            f"request {approval['id']} ran without a matching sealed approval: no reviewer's approval of it is stored"
        )


async def test_audit_verify_checks_the_execution_records_seals(tmp_path: Path, db_url: str) -> None:
    """With the deployment's binding keys, an execution record edited after the fact is named."""
    keys = {"approval": {"binding_keys": {"k1": base64.b64encode(bytes(range(32))).decode()}}}
    async with inprocess_treasury(tmp_path, {"store": {"url": db_url}, **keys}) as harness:
        task_id, _ = await ran(harness, "acct-sealed", 36_000)
        assert (await verified(harness))[0] == 0
        from mcp_approval.approval.persistence.schema import approval_executions_table

        await write(harness, update(approval_executions_table).values(worker="someone-else"))
        code, found = await verified(harness)
        assert code == 1
        assert found["executions"]["findings"] == [
            f"the execution record of task {task_id} generation 1 does not match its seal"
        ]
