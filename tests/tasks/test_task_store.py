"""The TaskStore contract against real SQLite, PostgreSQL and Redis stores."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_approval.clock import ManualClock
from mcp_approval.tasks import NewTask, TaskStatus
from mcp_approval.tasks.models import new_task_id
from mcp_approval.tasks.states import TERMINAL, TRANSITIONS, can_transition
from mcp_approval.tasks.store_url import store_from_url

pytestmark = pytest.mark.anyio


def new_task(**fields) -> NewTask:
    base = dict(
        task_id=new_task_id(),
        principal_digest="p" * 64,
        tool_name="t",
        ttl_ms=60_000,
        poll_interval_ms=100,
        owner="w1",
        lease_ms=10_000,
    )
    base.update(fields)
    return NewTask(**base)


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("postgres", marks=pytest.mark.postgres),
        pytest.param("redis", marks=pytest.mark.redis),
    ]
)
def store_url(request, tmp_path):
    """A fresh store of each kind: SQLite, PostgreSQL and Redis."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'tasks.db'}"
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
async def store(store_url):
    clock = ManualClock()
    s = store_from_url(store_url, clock=clock)
    await s.open()
    s.clock = clock  # type: ignore[attr-defined]
    yield s
    await s.close()


@pytest.mark.sep_check("sep-2663-readable-before-create-result")
async def test_created_task_is_readable_and_survives_reopening(store_url):
    first = store_from_url(store_url)
    await first.open()
    created = await first.create(new_task())
    await first.transition(created.task_id, TaskStatus.COMPLETED, result={"content": [], "resultType": "complete"})
    await first.close()
    second = store_from_url(store_url)
    await second.open()  # migrating again is a no-op
    row = await second.get(created.task_id)
    await second.close()
    assert row is not None
    assert row.status is TaskStatus.COMPLETED
    assert row.result == {"content": [], "resultType": "complete"}
    assert row.owner is None
    assert row.lease_expires_at is None


@pytest.mark.sep_check("sep-2663-terminal-status-final")
async def test_terminal_status_absorbs_every_later_write(store):
    created = await store.create(new_task())
    assert await store.transition(created.task_id, TaskStatus.COMPLETED, result={"ok": 1})
    for target in TaskStatus:
        assert not await store.transition(created.task_id, target)
    assert await store.add_input_requests(created.task_id, [{"method": "elicitation/create"}]) is None
    assert await store.submit_input_responses(created.task_id, {"in-1": {}}) == []
    flagged = await store.request_cancel(created.task_id)
    assert flagged is not None
    assert not flagged.cancel_requested
    row = await store.get(created.task_id)
    assert row.status is TaskStatus.COMPLETED
    assert row.result == {"ok": 1}


@pytest.mark.sep_check("sep-2663-terminal-status-final")
async def test_cancel_racing_completion_never_ends_cancelled_after_completed(store):
    """1,000 races of completion against cancellation on the real database."""
    outcomes = {"completed": 0, "cancelled": 0}
    for _ in range(1000):
        created = await store.create(new_task())
        complete = store.transition(created.task_id, TaskStatus.COMPLETED, result={"done": True})
        cancel = store.transition(created.task_id, TaskStatus.CANCELLED)
        won_complete, won_cancel = await asyncio.gather(complete, cancel)
        assert won_complete != won_cancel  # exactly one write lands
        row = await store.get(created.task_id)
        assert row.status is (TaskStatus.COMPLETED if won_complete else TaskStatus.CANCELLED)
        assert (row.result is not None) == won_complete
        outcomes[row.status.value] += 1
        assert not await store.transition(created.task_id, TaskStatus.CANCELLED)
        assert (await store.get(created.task_id)).status is row.status
    assert sum(outcomes.values()) == 1000


@pytest.mark.sep_check("sep-2663-input-keys-unique")
async def test_input_keys_are_unique_and_answers_move_back_to_working(store):
    created = await store.create(new_task())
    first = await store.add_input_requests(created.task_id, [{"method": "elicitation/create", "params": {}}] * 2)
    assert first == ["in-1", "in-2"]
    assert (await store.get(created.task_id)).status is TaskStatus.INPUT_REQUIRED
    assert await store.submit_input_responses(created.task_id, {"in-1": {"a": 1}, "nope": {}}) == ["in-1"]
    assert await store.submit_input_responses(created.task_id, {"in-1": {"a": 2}}) == []  # answered already
    row = await store.get(created.task_id)
    assert row.status is TaskStatus.INPUT_REQUIRED
    assert set(row.input_requests) == {"in-2"}
    assert await store.submit_input_responses(created.task_id, {"in-2": {"b": 1}}) == ["in-2"]
    assert (await store.get(created.task_id)).status is TaskStatus.WORKING
    assert await store.take_input_responses(created.task_id) == {"in-1": {"a": 1}, "in-2": {"b": 1}}
    assert await store.take_input_responses(created.task_id) == {}
    again = await store.add_input_requests(created.task_id, [{"method": "elicitation/create"}])
    assert again == ["in-3"]  # never reused


async def test_concurrent_answers_are_all_kept(store):
    created = await store.create(new_task())
    keys = await store.add_input_requests(created.task_id, [{"method": "elicitation/create"}] * 10)
    accepted = await asyncio.gather(*(store.submit_input_responses(created.task_id, {k: {"k": k}}) for k in keys))
    assert sorted(k for batch in accepted for k in batch) == sorted(keys)
    assert set(await store.take_input_responses(created.task_id)) == set(keys)


async def test_lapsed_leases_fail_and_heartbeats_keep_them(store):
    alive = await store.create(new_task(owner="w1", lease_ms=1000))
    dead = await store.create(new_task(owner="w2", lease_ms=1000))
    store.clock.advance(900)
    await store.heartbeat("w1", [alive.task_id, dead.task_id], 1000)  # w1 cannot renew w2's task
    store.clock.advance(200)
    failed = await store.fail_lapsed({"code": -32603, "message": "lost"}, "lost")
    assert failed == [dead.task_id]
    assert (await store.get(dead.task_id)).status is TaskStatus.FAILED
    assert (await store.get(dead.task_id)).error == {"code": -32603, "message": "lost"}
    assert (await store.get(alive.task_id)).status is TaskStatus.WORKING


async def test_an_owner_fenced_write_lands_only_while_the_owner_holds_the_task(store):
    held = await store.create(new_task(owner="w1"))
    assert not await store.transition(held.task_id, TaskStatus.COMPLETED, result={"by": "w2"}, owner="w2")
    assert await store.transition(held.task_id, TaskStatus.COMPLETED, result={"by": "w1"}, owner="w1")
    lapsed = await store.create(new_task(owner="w1"))
    store.clock.advance(10_001)
    assert await store.fail_lapsed({"code": -32603, "message": "lost"}, "lost") == [lapsed.task_id]
    late = await store.transition(lapsed.task_id, TaskStatus.COMPLETED, result={"late": True}, owner="w1")
    assert not late  # the sweeper's outcome stands: the late owner overwrites nothing
    assert (await store.get(held.task_id)).result == {"by": "w1"}
    assert (await store.get(lapsed.task_id)).status is TaskStatus.FAILED


async def test_heartbeat_reports_cancel_and_input_signals(store):
    task = await store.create(new_task(owner="w1"))
    other = await store.create(new_task(owner="w1"))
    (key,) = await store.add_input_requests(other.task_id, [{"method": "elicitation/create"}])
    await store.request_cancel(task.task_id)
    await store.submit_input_responses(other.task_id, {key: {"action": "accept"}})
    signals = {s.task_id: s for s in await store.heartbeat("w1", [task.task_id, other.task_id], 1000)}
    assert signals[task.task_id].cancel_requested
    assert signals[other.task_id].has_input_responses
    assert not signals[other.task_id].cancel_requested


async def test_ttl_purge_and_extension(store):
    short = await store.create(new_task(ttl_ms=1000))
    forever = await store.create(new_task(ttl_ms=None))
    extended = await store.create(new_task(ttl_ms=1000))
    assert await store.extend_ttl(extended.task_id, 5000)
    store.clock.advance(1000)
    assert await store.purge_expired() == [short.task_id]
    assert await store.get(short.task_id) is None
    assert await store.get(forever.task_id) is not None
    assert (await store.get(extended.task_id)).ttl_ms == 5000
    with pytest.raises(ValueError, match="positive"):
        await store.extend_ttl(extended.task_id, 0)


async def test_count_active(store):
    for _ in range(3):
        await store.create(new_task(principal_digest="a" * 64))
    done = await store.create(new_task(principal_digest="a" * 64))
    await store.transition(done.task_id, TaskStatus.FAILED, error={"code": 1, "message": "x"})
    await store.create(new_task(principal_digest="b" * 64))
    assert await store.count_active() == 4
    assert await store.count_active("a" * 64) == 3


@pytest.mark.sep_check("sep-2663-terminal-status-final")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(targets=st.lists(st.sampled_from(list(TaskStatus)), max_size=8))
async def test_store_follows_the_state_table(store, targets):
    """Any sequence of requested transitions: the store changes status exactly when the table allows."""
    created = await store.create(new_task())
    status = TaskStatus.WORKING
    for target in targets:
        written = await store.transition(created.task_id, target)
        assert written == can_transition(status, target)
        if written:
            status = target
        assert (await store.get(created.task_id)).status is status
    if status in TERMINAL:
        assert not TRANSITIONS[status]


def test_state_table_shape():
    assert {TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED} == TERMINAL
    assert can_transition(TaskStatus.WORKING, TaskStatus.INPUT_REQUIRED)
    assert can_transition(TaskStatus.INPUT_REQUIRED, TaskStatus.WORKING)
    assert not can_transition(TaskStatus.WORKING, TaskStatus.WORKING)
