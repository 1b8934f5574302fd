"""Two workers on one PostgreSQL or Redis store: change signals cross between them at once.

Heartbeats are made slow here (a 5 s poll interval and a long lease), so a cancel, an answer or a
notification that arrives within a second can only have travelled by ``LISTEN``/``NOTIFY`` or
pub/sub, not by the heartbeat safety net.
"""

from __future__ import annotations

import time

import httpx
import pytest

from mcp_approval.checks.wire import Wire
from tests.support.listen import listening
from tests.support.polling import eventually
from tests.support.process import running
from tests.support.timing import scaled

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

FLAGS = ("--tokens", "--threshold", "0", "--poll-interval", "5", "--lease-grace", "20")
#: Well under the 5 s heartbeat: only a signal can be this fast.
SIGNAL_BUDGET_S = 2.0


def wire_to(server, token: str = "alice-token") -> Wire:
    return Wire(httpx.AsyncClient(base_url=server.base_url, timeout=scaled(10)), token=token)


def status_is(*statuses):
    return lambda reply: reply.status == 200 and reply.result["status"] in statuses


@pytest.fixture(
    params=[pytest.param("postgres", marks=pytest.mark.postgres), pytest.param("redis", marks=pytest.mark.redis)]
)
def shared_store(request) -> str:
    return str(request.getfixturevalue("postgres_url" if request.param == "postgres" else "redis_url"))


@pytest.mark.sep_check("sep-2663-notification-per-status-change")
async def test_the_notification_leaves_the_other_worker(shared_store, tmp_path):
    """The task runs (and changes) on A; the client's listen stream is served by B."""
    with (
        running(shared_store, tmp_path, *FLAGS, name="a") as a,
        running(shared_store, tmp_path, *FLAGS, name="b") as b,
    ):
        on_a = wire_to(a)
        task_id = (await on_a.call_tool("ask_name", {})).result["taskId"]
        async with listening(b.base_url, [task_id], token="alice-token") as stream:
            assert stream.frames[0]["params"]["notifications"]["taskIds"] == [task_id]
            await stream.wait_for(lambda _: "input_required" in stream.statuses(task_id))
            (key,) = stream.task_frames(task_id)[-1]["inputRequests"]
            answered_at = time.monotonic()
            await on_a.update(task_id, {key: {"action": "accept", "content": {"name": "Grace"}}})
            await stream.wait_for(lambda _: stream.statuses(task_id)[-1] == "completed")
            elapsed = time.monotonic() - answered_at
    final = stream.task_frames(task_id)[-1]
    assert final["result"]["content"][0]["text"] == "Hello, Grace!"
    assert elapsed < SIGNAL_BUDGET_S, f"completion reached B's stream after {elapsed:.2f}s"


async def test_cancel_and_update_on_b_reach_the_owner_a_at_once(shared_store, tmp_path):
    with (
        running(shared_store, tmp_path, *FLAGS, name="a") as a,
        running(shared_store, tmp_path, *FLAGS, name="b") as b,
    ):
        on_a, on_b = wire_to(a), wire_to(b)
        slow = (await on_a.call_tool("slow_job", {"seconds": 60})).result["taskId"]
        asked = time.monotonic()
        assert (await on_b.cancel(slow)).status == 200
        await eventually(lambda: on_b.get(slow), status_is("cancelled"), timeout_s=SIGNAL_BUDGET_S)
        cancel_s = time.monotonic() - asked

        asking = (await on_a.call_tool("ask_name", {})).result["taskId"]
        waiting = (await eventually(lambda: on_b.get(asking), status_is("input_required"))).result
        (key,) = waiting["inputRequests"]
        asked = time.monotonic()
        await on_b.update(asking, {key: {"action": "accept", "content": {"name": "Ada"}}})
        done = (await eventually(lambda: on_b.get(asking), status_is("completed"), timeout_s=SIGNAL_BUDGET_S)).result
        update_s = time.monotonic() - asked
    assert done["result"]["content"][0]["text"] == "Hello, Ada!"
    assert cancel_s < SIGNAL_BUDGET_S
    assert update_s < SIGNAL_BUDGET_S
