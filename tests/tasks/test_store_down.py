"""A store outage: the owner rides it out, every other worker fails closed, nothing is lost or run twice."""

from __future__ import annotations

import asyncio

import asyncpg
import httpx
import pytest

from mcp_approval.checks.wire import Wire
from mcp_approval.clock import ManualClock
from mcp_approval.storage import StoreUnavailableError
from mcp_approval.tasks import NewTask, SqlTaskStore, TaskOptions, TaskStatus
from mcp_approval.tasks.models import new_task_id
from mcp_approval.tasks.runtime import TaskRuntime
from tests.support.polling import eventually
from tests.support.process import running
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio

# Demo server flags: quick polls and sweeps, lease = 3 x 0.1 s + 1 s = 1.3 s.
FLAGS = ("--tokens", "--threshold", "0", "--poll-interval", "0.1", "--lease-grace", "1.0")
UNAVAILABLE = {"code": -32603, "message": "Task store unavailable"}


async def set_database_reachable(admin_url: str, database: str, reachable: bool) -> None:
    conn = await asyncpg.connect(admin_url, timeout=scaled(5))
    try:
        await conn.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS {str(reachable).lower()}')
        if not reachable:
            await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
                database,
            )
    finally:
        await conn.close()


async def stored_row(database_url: str, task_id: str) -> asyncpg.Record:
    conn = await asyncpg.connect(database_url.replace("postgresql://", "postgres://"), timeout=scaled(5))
    try:
        return await conn.fetchrow("SELECT status, version, result_json, owner FROM tasks WHERE task_id = $1", task_id)
    finally:
        await conn.close()


def status_is(*statuses):
    return lambda reply: reply.status == 200 and reply.result["status"] in statuses


@pytest.mark.postgres
async def test_the_owner_answers_from_memory_while_changes_fail_closed(serve_inprocess, postgres_url):
    from tests.conftest import POSTGRES_ADMIN_URL

    database = postgres_url.rsplit("/", 1)[1]
    async with serve_inprocess(store_url=postgres_url, threshold_s=0.0) as (wire, tasks):
        created = (await wire.call_tool("slow_job", {"seconds": 1.0, "label": "outage"})).result
        await set_database_reachable(POSTGRES_ADMIN_URL, database, False)
        try:
            during = await wire.get(created["taskId"])
            cancel = await wire.cancel(created["taskId"])
            execution = tasks.runtime.local(created["taskId"])
            assert execution is not None
            await execution.wait(None)  # the tool finishes while the store is down
            finished = await wire.get(created["taskId"])
        finally:
            await set_database_reachable(POSTGRES_ADMIN_URL, database, True)
        after = (await eventually(lambda: wire.get(created["taskId"]), status_is("completed"))).result
    assert during.result["status"] == "working"  # the owner answers from its own view
    assert cancel.error == UNAVAILABLE  # a change still needs the store
    assert finished.result["result"]["content"][0]["text"] == "outage finished after 1.0s"
    assert after["result"]["content"][0]["text"] == "outage finished after 1.0s"


@pytest.mark.postgres
@pytest.mark.slow
async def test_the_owner_rides_out_an_outage_longer_than_its_lease(postgres_url, tmp_path):
    """Two worker processes on one PostgreSQL database; the database refuses connections for longer
    than a lease while the task runs and completes on worker A."""
    from tests.conftest import POSTGRES_ADMIN_URL

    database = postgres_url.rsplit("/", 1)[1]
    with running(postgres_url, tmp_path, *FLAGS, name="a") as a, running(postgres_url, tmp_path, *FLAGS, name="b") as b:
        on_a = Wire(httpx.AsyncClient(base_url=a.base_url, timeout=scaled(10)), token="alice-token")
        on_b = Wire(httpx.AsyncClient(base_url=b.base_url, timeout=scaled(10)), token="alice-token")
        task_id = (await on_a.call_tool("slow_job", {"seconds": 3.0, "label": "outage"})).result["taskId"]
        await set_database_reachable(POSTGRES_ADMIN_URL, database, False)
        try:
            working = await on_a.get(task_id)
            elsewhere = await eventually(lambda: on_b.get(task_id), lambda reply: reply.error is not None)
            intruder = await on_a.as_principal("bob-token").get(task_id)
            # The tool ends about 3 s after the cut: by then A's 1.3 s lease has lapsed in the store.
            completed = (await eventually(lambda: on_a.get(task_id), status_is("completed"))).result
            still_elsewhere = await on_b.get(task_id)
        finally:
            await set_database_reachable(POSTGRES_ADMIN_URL, database, True)
        stored = (await eventually(lambda: on_b.get(task_id), status_is("completed", "failed"))).result
        row = await stored_row(postgres_url, task_id)
    runs = sum((tmp_path / f"{name}.log").read_text().count("slow_job outage started") for name in ("a", "b"))
    assert working.result["status"] == "working"
    assert elsewhere.error == UNAVAILABLE  # the other worker fails closed
    assert still_elsewhere.error == UNAVAILABLE
    assert intruder.error["code"] == -32602  # the memory view keeps the ownership check
    assert completed["result"]["content"][0]["text"] == "outage finished after 3.0s"
    assert stored["status"] == "completed"  # not failed by a sweeper as a lost worker
    assert stored["result"] == completed["result"]
    assert (row["status"], row["version"], row["owner"]) == ("completed", 1, None)  # one terminal write
    assert runs == 1


@pytest.mark.postgres
async def test_after_an_outage_the_sweeper_gives_owners_one_lease_to_come_back(postgres_url):
    """The sweeper cannot tell a dead owner from one the outage cut off too: it waits a lease."""
    from tests.conftest import POSTGRES_ADMIN_URL

    database = postgres_url.rsplit("/", 1)[1]
    clock = ManualClock()
    runtime = TaskRuntime(SqlTaskStore(postgres_url, clock=clock), TaskOptions(), clock=clock)
    lease_ms = runtime.options.lease_ms
    await runtime.store.open()
    try:
        task = NewTask(new_task_id(), None, "slow_job", None, None, owner="cut-off-worker", lease_ms=lease_ms)
        await runtime.store.create(task)
        await set_database_reachable(POSTGRES_ADMIN_URL, database, False)
        try:
            with pytest.raises(StoreUnavailableError):
                await runtime.sweep_once()
        finally:
            await set_database_reachable(POSTGRES_ADMIN_URL, database, True)
        clock.advance(lease_ms + 1)  # the outage outlasted the lease
        await runtime.sweep_once()
        after_return = await runtime.store.get(task.task_id)
        clock.advance(lease_ms)  # a lease after the store came back, the owner has not renewed
        await runtime.sweep_once()
        a_lease_later = await runtime.store.get(task.task_id)
    finally:
        await runtime.store.close()
    assert after_return is not None
    assert after_return.status is TaskStatus.WORKING
    assert a_lease_later is not None
    assert a_lease_later.status is TaskStatus.FAILED


class TransitionsRefused(SqlTaskStore):
    """A real store whose status writes fail as unreachable while ``down`` (the rest answers)."""

    down = False

    async def transition(self, *args, **kwargs):
        if self.down:
            raise StoreUnavailableError("store unavailable: injected")
        return await super().transition(*args, **kwargs)


async def test_the_lease_of_a_finished_task_whose_outcome_is_not_stored_yet_is_renewed(tmp_path):
    clock = ManualClock()
    store = TransitionsRefused(f"sqlite:///{tmp_path / 'tasks.db'}", clock=clock)
    runtime = TaskRuntime(store, TaskOptions(), clock=clock)
    await store.open()
    try:
        execution = runtime.begin(tool_name="t", principal_digest=None, call=lambda _answered: asyncio.sleep(0, {}))
        store.down = True
        execution.start()
        record = await execution.promote()
        assert record is not None
        await execution.wait(None)  # the tool returned; its terminal write keeps failing
        clock.advance(runtime.options.lease_ms * 2)
        await runtime.heartbeat_once()
        renewed = await store.get(record.task_id)
        remembered = runtime.remembered(record.task_id)
        store.down = False
        await runtime.heartbeat_once()  # the store answers: the waiting write goes at once
        await execution.join()
        stored = await store.get(record.task_id)
    finally:
        await store.close()
    assert renewed is not None
    assert renewed.lease_expires_at == clock.now_ms() + runtime.options.lease_ms
    assert remembered is not None
    assert remembered.status is TaskStatus.COMPLETED
    assert stored is not None
    assert (stored.status, stored.version) == (TaskStatus.COMPLETED, 1)
