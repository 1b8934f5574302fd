"""The execution claim against cancellation, expiry and a second claim: exactly one side ever wins.

Each race starts the two compare-and-sets together on a fresh workflow (in random order) and then
checks the stored workflow and task rows against the reported winner. The two-process variant
runs the sides in separate operating-system processes on PostgreSQL, released by one start line.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, select

from mcp_approval.approval.persistence.schema import APPROVAL_MIGRATIONS, approval_workflows_table
from mcp_approval.approval.persistence.states import Disposition, IntentState, Phase
from mcp_approval.approval.persistence.store import Admission, ApprovalStore, Intent, NewWorkflow, TaskOutcome
from mcp_approval.storage import Database, StoreUnavailableError, migrate, open_database
from mcp_approval.tasks.schema import TASKS_MIGRATIONS, tasks_table
from mcp_approval.tasks.states import TaskStatus
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio

#: Claim against cancel: the race the enforcement point must never lose (SEP-2848's cancelled task
#: that later executes), run 1,000 times on each store.
RACES = 1_000
#: Claim against expiry and claim against claim take the same compare-and-set paths; fewer of
#: each still sees both sides win many times, in both orders.
OTHER_RACES = 300
PROCESS_TASKS = 400
CREATE_CONCURRENCY = 16
PRINCIPAL = "ab" * 32
LEASE_MS = 60_000
DEADLINE_MS = 120_000
WORKER = Path(__file__).with_name("race_worker.py")
CANCELLED = TaskOutcome(TaskStatus.CANCELLED, "Cancelled")
DENIAL_RESULT: dict[str, Any] = {
    "content": [{"type": "text", "text": "The approval request expired."}],
    "isError": True,
}
EXPIRED = TaskOutcome(TaskStatus.COMPLETED, result=DENIAL_RESULT, disposition=Disposition.DENIED_NOT_EXECUTED.value)


@dataclass(frozen=True)
class Row:
    """What the database holds for one task: its workflow and its task row."""

    phase: Phase
    lease_owner: str | None
    disposition: str | None
    status: TaskStatus
    result: dict[str, Any] | None


async def _create_one(store: ApprovalStore, task_id: str) -> None:
    key = f"key-{task_id}"
    digest = f"{task_id:0>64}"[-64:]
    intent = Intent(
        key=key,
        task_id=task_id,
        generation=1,
        principal_digest=PRINCIPAL,
        tool_name="deploy",
        arguments_digest=digest,
        body_sealed="k1:body",
        state=IntentState.OPEN,
        handle=None,
        created_at=0,
    )
    admission, _ = await store.record_intent(intent, submissions_per_minute=10**9, max_pending=10**9)
    assert admission is Admission.RECORDED
    assert await store.mark_submitted(key, f"handle-{task_id}")
    created = await store.create_task(
        NewWorkflow(
            task_id=task_id,
            intent_key=key,
            principal_digest=PRINCIPAL,
            tool_name="deploy",
            arguments_digest=digest,
            binding_sealed="k1:abc",
            tool_fingerprint=None,
            backend="local",
            handle=f"handle-{task_id}",
            template=None,
            request_deadline=None,
            next_check_at=0,
            ttl_ms=60_000,
            poll_interval_ms=100,
            status_message="Awaiting approval",
            meta={},
        )
    )
    assert created


async def create_workflows(store: ApprovalStore, prefix: str, count: int) -> list[str]:
    """``count`` fresh pending workflows (generation 1), created a few at a time."""
    task_ids = [f"{prefix}-{index:05d}" for index in range(count)]
    for start in range(0, count, CREATE_CONCURRENCY):
        await asyncio.gather(*(_create_one(store, task_id) for task_id in task_ids[start : start + CREATE_CONCURRENCY]))
    return task_ids


async def read_row(database: Database, task_id: str) -> Row:
    def read(conn: Connection) -> Row:
        w = approval_workflows_table
        t = tasks_table
        row = conn.execute(
            select(w.c.phase, w.c.lease_owner, w.c.disposition, t.c.status, t.c.result_json)
            .join(t, t.c.task_id == w.c.task_id)
            .where(w.c.task_id == task_id)
        ).one()
        return Row(
            phase=Phase(row.phase),
            lease_owner=row.lease_owner,
            disposition=row.disposition,
            status=TaskStatus(row.status),
            result=None if row.result_json is None else json.loads(row.result_json),
        )

    return await database.read(read)


async def claim(store: ApprovalStore, task_id: str, worker: str = "worker-A", generation: int = 1) -> bool:
    now = store.clock.now_ms()
    return await store.claim(task_id, generation, worker, lease_until=now + LEASE_MS, deadline=now + DEADLINE_MS)


async def both(first: Awaitable[bool], second: Awaitable[bool], *, swap: bool, errors: list[str]) -> tuple[bool, bool]:
    """Start both compare-and-sets together, ``second`` first when ``swap``; results in argument order.

    A side that fails with :class:`StoreUnavailableError` (e.g. a deadlock abort) counts as not
    winning; its message goes to ``errors`` so the test can fail on it after checking the winner.
    """
    results: list[bool | BaseException]
    if swap:
        results = list(reversed(await asyncio.gather(second, first, return_exceptions=True)))
    else:
        results = list(await asyncio.gather(first, second, return_exceptions=True))
    outcome: list[bool] = []
    for result in results:
        if isinstance(result, StoreUnavailableError):
            errors.append(str(result))
            outcome.append(False)
        elif isinstance(result, BaseException):
            raise result
        else:
            outcome.append(result)
    return outcome[0], outcome[1]


def assert_no_errors(task_id: str, errors: list[str]) -> None:
    """A race must end in a clean win and a clean loss: the loser gets ``False``, not an error.

    Checked after the winner's rows (so safety is verified first), and at the first failing race:
    a deadlock costs PostgreSQL's ``deadlock_timeout`` (1 s) per race.
    """
    assert not errors, f"{task_id}: a side raised instead of losing cleanly: {errors}"


async def race_against_fence(
    store: ApprovalStore, outcome: TaskOutcome, prefix: str, check_fenced: Callable[[Row], None], races: int
) -> tuple[int, int]:
    """Race claim vs ``fence(outcome)`` ``races`` times; returns (claims won, fences won)."""
    errors: list[str] = []
    rng = random.Random(f"{prefix}-{store.database.dialect}")
    task_ids = await create_workflows(store, prefix, races)
    claims = fences = 0
    for task_id in task_ids:
        swap = rng.random() < 0.5
        generation = 1 if rng.random() < 0.5 else None
        claimed, fenced = await both(
            claim(store, task_id), store.fence(task_id, outcome, generation=generation), swap=swap, errors=errors
        )
        assert claimed != fenced, f"{task_id}: claim={claimed} fence={fenced} (fence first: {swap}) {errors}"
        row = await read_row(store.database, task_id)
        if claimed:
            claims += 1
            assert row.phase is Phase.CLAIMED, (task_id, row)
            assert row.lease_owner == "worker-A", (task_id, row)
            assert row.status is TaskStatus.WORKING, (task_id, row)
            assert row.result is None, (task_id, row)
            assert not await store.fence(task_id, outcome), f"{task_id}: fenced after its claim"
        else:
            fences += 1
            assert row.phase is Phase.FENCED, (task_id, row)
            check_fenced(row)
            assert not await claim(store, task_id, "worker-late"), f"{task_id}: claimed after its fence"
        assert await read_row(store.database, task_id) == row, f"{task_id}: the losing retry changed the rows"
        assert_no_errors(task_id, errors)
    return claims, fences


@pytest.mark.sep_check(
    "sep-2848-single-atomic-claim", "sep-2848-checks-hold-at-claim", "sep-2848-never-executed-and-cancelled"
)
async def test_claim_vs_cancel(store: ApprovalStore) -> None:
    def cancelled(row: Row) -> None:
        assert row.status is TaskStatus.CANCELLED, row
        assert row.result is None, row
        assert row.lease_owner is None, row

    claims, fences = await race_against_fence(store, CANCELLED, "cancel", cancelled, RACES)
    assert claims + fences == RACES
    assert claims > 0, "the claim never won: the race did not exercise both outcomes"
    assert fences > 0, "the fence never won: the race did not exercise both outcomes"


@pytest.mark.sep_check("sep-2848-single-atomic-claim", "sep-2848-checks-hold-at-claim")
async def test_claim_vs_expiry(store: ApprovalStore) -> None:
    def denied(row: Row) -> None:
        assert row.status is TaskStatus.COMPLETED, row
        assert row.result == DENIAL_RESULT, row
        assert row.disposition == Disposition.DENIED_NOT_EXECUTED.value, row

    claims, fences = await race_against_fence(store, EXPIRED, "expiry", denied, OTHER_RACES)
    assert claims + fences == OTHER_RACES
    assert claims > 0, "the claim never won: the race did not exercise both outcomes"
    assert fences > 0, "the expiry never won: the race did not exercise both outcomes"


@pytest.mark.sep_check("sep-2848-at-most-once", "sep-2848-single-atomic-claim")
async def test_claim_vs_claim(store: ApprovalStore) -> None:
    rng = random.Random(f"claim-claim-{store.database.dialect}")
    task_ids = await create_workflows(store, "double", OTHER_RACES)
    wins = {"worker-A": 0, "worker-B": 0}
    errors: list[str] = []
    for task_id in task_ids:
        a, b = await both(
            claim(store, task_id, "worker-A"), claim(store, task_id, "worker-B"), swap=rng.random() < 0.5, errors=errors
        )
        assert a != b, f"{task_id}: worker-A={a} worker-B={b} {errors}"
        winner = "worker-A" if a else "worker-B"
        wins[winner] += 1
        row = await read_row(store.database, task_id)
        assert row.phase is Phase.CLAIMED, (task_id, row)
        assert row.lease_owner == winner, (task_id, row)
        assert row.status is TaskStatus.WORKING, (task_id, row)
        assert not await claim(store, task_id, "worker-C"), f"{task_id}: claimed a third time"
        assert not await store.fence(task_id, CANCELLED), f"{task_id}: fenced after its claim"
        assert await read_row(store.database, task_id) == row
        assert_no_errors(task_id, errors)
    assert wins["worker-A"] > 0
    assert wins["worker-B"] > 0


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.sep_check("sep-2848-single-atomic-claim")
async def test_claim_vs_cancel_in_two_processes(postgres_url: str, tmp_path: Path) -> None:
    database = open_database(postgres_url)
    await migrate(database, TASKS_MIGRATIONS, APPROVAL_MIGRATIONS)
    store = ApprovalStore(database, result_retention_ms=60_000)
    try:
        task_ids = await create_workflows(store, "proc", PROCESS_TASKS)
        ids_file = tmp_path / "ids.json"
        ids_file.write_text(json.dumps(task_ids))
        reports = await asyncio.to_thread(_run_workers, postgres_url, ids_file)
        claimed, fenced = set(reports["A"]["won"]), set(reports["B"]["won"])
        assert not claimed & fenced, f"both won: {sorted(claimed & fenced)}"
        assert claimed | fenced == set(task_ids), f"nobody won: {sorted(set(task_ids) - claimed - fenced)}"
        assert set(reports["A"]["lost"]) <= fenced
        assert set(reports["B"]["lost"]) <= claimed
        for task_id in task_ids:
            row = await read_row(database, task_id)
            if task_id in claimed:
                assert (row.phase, row.status, row.lease_owner) == (Phase.CLAIMED, TaskStatus.WORKING, "worker-A")
            else:
                assert (row.phase, row.status, row.lease_owner) == (Phase.FENCED, TaskStatus.CANCELLED, None)
        assert reports["A"]["errors"] == {}, reports["A"]["errors"]
        assert reports["B"]["errors"] == {}, reports["B"]["errors"]
    finally:
        await database.close()


def _run_workers(url: str, ids_file: Path) -> dict[str, dict[str, Any]]:
    """Start worker A (claims) and B (cancels), release them together, and collect their reports."""
    workers = {
        role: subprocess.Popen(
            [sys.executable, str(WORKER), url, role, str(ids_file)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for role in ("A", "B")
    }
    try:
        for role, process in workers.items():
            assert process.stdout is not None
            line = process.stdout.readline()
            if line.strip() != "ready":
                _, err = process.communicate(timeout=scaled(30))
                raise AssertionError(f"worker {role} did not get ready: {line!r}\n{err}")
        for process in workers.values():  # both are connected and blocked on stdin: release them together
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        reports: dict[str, dict[str, Any]] = {}
        for role, process in workers.items():
            out, err = process.communicate(timeout=scaled(120))
            assert process.returncode == 0, f"worker {role} exited {process.returncode}\n{err}"
            reports[role] = json.loads(out.strip().splitlines()[-1])
        return reports
    finally:
        for process in workers.values():
            if process.poll() is None:
                process.kill()
                process.wait()
