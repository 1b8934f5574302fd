"""``notifications/tasks`` over ``subscriptions/listen`` on the 2026-07-28 wire (real HTTP: streams).

The exchange tests run once per task store (SQLite, PostgreSQL, Redis): each store signals status changes
its own way (in process, ``LISTEN/NOTIFY``, pub/sub), and the stream must look the same on all three.
"""

from __future__ import annotations

import httpx
import pytest

from mcp_approval.checks.wire import Wire
from tests.support.listen import listening
from tests.support.process import running
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio

SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


def ended(statuses: list[str]) -> bool:
    return bool(statuses) and statuses[-1] in ("completed", "failed", "cancelled")


@pytest.fixture(scope="module")
def server(module_store_url, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("notify")
    with running(module_store_url, tmp_path, "--threshold", "0") as process:
        yield process


@pytest.fixture
def token_server(module_store_url, tmp_path):
    # Two processes share PostgreSQL or Redis as workers do; a SQLite file belongs to one process.
    url = f"sqlite:///{tmp_path / 'tasks.db'}" if module_store_url.startswith("sqlite") else module_store_url
    with running(url, tmp_path, "--threshold", "0", "--tokens") as process:
        yield process


@pytest.mark.sep_check(
    "sep-2663-listen-ack-notified-ids-only",
    "sep-2663-no-progress-on-task-stream",
    "sep-2663-notification-per-status-change",
    "sep-2663-notification-equals-tasks-get",
    "sep-2663-notification-subscription-id",
)
async def test_every_status_change_is_notified_in_order_and_the_last_equals_tasks_get(server):
    async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(10)) as http:
        wire = Wire(http)
        created = (await wire.call_tool("ask_name", {})).result
        task_id = created["taskId"]
        async with listening(server.base_url, [task_id, "no-such-task"], request_id=41) as stream:
            ack = stream.frames[0]
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"]["notifications"]["taskIds"] == [task_id]
            assert ack["params"]["_meta"][SUBSCRIPTION_ID] == 41
            await stream.wait_for(lambda _: "input_required" in stream.statuses(task_id))
            waiting = stream.task_frames(task_id)[-1]
            (key,) = waiting["inputRequests"]
            await wire.update(task_id, {key: {"action": "accept", "content": {"name": "Luca"}}})
            await stream.wait_for(lambda _: ended(stream.statuses(task_id)))
            final = stream.task_frames(task_id)[-1]
            got = (await wire.get(task_id)).result
    statuses = stream.statuses(task_id)
    assert statuses[statuses.index("input_required") :] == ["input_required", "working", "completed"]
    assert final["_meta"][SUBSCRIPTION_ID] == 41
    assert "resultType" not in final
    assert final["result"]["content"][0]["text"] == "Hello, Luca!"
    del got["resultType"]
    got.pop("_meta", None)
    assert {k: v for k, v in final.items() if k != "_meta"} == got
    assert all(frame["params"]["_meta"][SUBSCRIPTION_ID] == 41 for frame in stream.frames)
    methods = {frame["method"] for frame in stream.frames}
    assert methods == {"notifications/subscriptions/acknowledged", "notifications/tasks"}


@pytest.mark.sep_check("sep-2663-notification-only-owned-ids")
async def test_ids_of_another_principal_are_treated_like_unknown_ids(token_server):
    async with httpx.AsyncClient(base_url=token_server.base_url, timeout=scaled(10)) as http:
        alice = Wire(http, token="alice-token")
        task_id = (await alice.call_tool("slow_job", {"seconds": 0.5})).result["taskId"]
        async with listening(token_server.base_url, [task_id, "unknown-id"], token="bob-token") as bobs:
            async with listening(token_server.base_url, [task_id], token="alice-token") as alices:
                await alices.wait_for(lambda _: ended(alices.statuses(task_id)))
            bob_ack = bobs.frames[0]["params"]["notifications"]
            assert bob_ack.get("taskIds", []) == []
            assert bobs.task_frames() == []
    assert alices.frames[0]["params"]["notifications"]["taskIds"] == [task_id]
    assert alices.statuses(task_id)[-1] == "completed"


async def test_only_the_requested_tasks_are_notified_and_core_filters_still_work(server):
    async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(10)) as http:
        wire = Wire(http)
        watched = (await wire.call_tool("slow_job", {"seconds": 0.3, "label": "watched"})).result["taskId"]
        other = (await wire.call_tool("slow_job", {"seconds": 0.1, "label": "other"})).result["taskId"]
        async with listening(server.base_url, [watched], extra_filter={"toolsListChanged": True}) as stream:
            await stream.wait_for(lambda _: ended(stream.statuses(watched)))
            assert (await wire.get(other)).result["status"] == "completed"
    acknowledged = stream.frames[0]["params"]["notifications"]
    assert acknowledged["toolsListChanged"] is True
    assert acknowledged["taskIds"] == [watched]
    assert {params["taskId"] for params in stream.task_frames()} == {watched}


async def test_a_cancelled_task_is_notified(server):
    async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(10)) as http:
        wire = Wire(http)
        task_id = (await wire.call_tool("slow_job", {"seconds": 30})).result["taskId"]
        async with listening(server.base_url, [task_id]) as stream:
            await stream.wait_for(lambda _: "working" in stream.statuses(task_id))
            await wire.cancel(task_id)
            await stream.wait_for(lambda _: ended(stream.statuses(task_id)))
    assert stream.statuses(task_id)[-1] == "cancelled"


async def test_a_listen_opened_again_after_a_dropped_stream_gets_the_current_state(server):
    async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(10)) as http:
        wire = Wire(http)
        task_id = (await wire.call_tool("slow_job", {"seconds": 0.4})).result["taskId"]
        async with listening(server.base_url, [task_id]) as first:
            await first.wait_for(lambda _: bool(first.statuses(task_id)))
        # The first stream is gone; the task finishes meanwhile.
        while (await wire.get(task_id)).result["status"] == "working":
            async with listening(server.base_url, [task_id]) as probe:
                await probe.wait_for(lambda _: bool(probe.statuses(task_id)))
        async with listening(server.base_url, [task_id]) as again:
            await again.wait_for(lambda _: ended(again.statuses(task_id)))
    assert again.task_frames(task_id)[0]["result"]["content"][0]["text"] == "job finished after 0.4s"


async def test_malformed_task_ids_are_invalid_params(server):
    async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(10)) as http:
        reply = await Wire(http).request("subscriptions/listen", {"notifications": {"taskIds": "abc"}})
    assert reply.error["code"] == -32602
    assert "taskIds" in reply.error["message"]


@pytest.fixture(scope="module")
def slow_poll_server(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("slow-poll")
    args = ("--threshold", "0", "--poll-interval", "5")
    with running(f"sqlite:///{tmp_path / 'tasks.db'}", tmp_path, *args) as process:
        yield process


async def _call_slow_job(base_url: str, tasks_client) -> tuple[str, float]:
    import time

    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with httpx2.AsyncClient(timeout=scaled(30)) as http:
        transport = streamable_http_client(f"{base_url}/mcp", http_client=http)
        async with Client(transport, extensions=[tasks_client]) as client:
            started = time.monotonic()
            result = await client.call_tool("slow_job", {"seconds": 0.3, "label": "pushed"})
            return result.content[0].text, time.monotonic() - started


async def test_tasks_client_wakes_on_the_notification_instead_of_the_poll_interval(slow_poll_server):
    """The server suggests polling every 5 s; the completion arrives by notification well before."""
    from mcp_approval.client import TasksClient

    tasks_client = TasksClient(task_wait_s=scaled(30))
    text, elapsed = await _call_slow_job(slow_poll_server.base_url, tasks_client)
    assert text == "pushed finished after 0.3s"
    assert tasks_client.push is not None
    assert tasks_client.push.received >= 1
    assert elapsed < 3.0, f"took {elapsed:.2f}s: the client slept out the 5 s poll interval"


async def test_tasks_client_without_notifications_polls_at_the_interval(slow_poll_server):
    from mcp_approval.client import TasksClient

    text, elapsed = await _call_slow_job(
        slow_poll_server.base_url, TasksClient(task_wait_s=scaled(30), notifications=False)
    )
    assert text == "pushed finished after 0.3s"
    assert elapsed >= 4.5  # one full poll interval: the figure the notification saves


async def test_the_listen_request_of_the_concepts_page_works_as_it_says(server):
    """The JSON of docs/concepts/tasks.md, sent as it is (with the envelope and a real task id)."""
    import json
    import re
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "concepts" / "tasks.md").read_text(encoding="utf-8")
    section = page.split("## Notifications", 1)[1]
    request = json.loads(re.search(r"```json\n(.*?)```", section, re.S).group(1))
    async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(10)) as http:
        task_id = (await Wire(http).call_tool("slow_job", {"seconds": 0.2})).result["taskId"]
    async with listening(server.base_url, [task_id], request_id=request["id"], method=request["method"]) as stream:
        await stream.wait_for(lambda _: ended(stream.statuses(task_id)))
    assert request["params"]["notifications"]["taskIds"] == ["TASK_ID"]
    assert stream.frames[0]["params"]["notifications"]["taskIds"] == [task_id]
    assert all(frame["params"]["_meta"][SUBSCRIPTION_ID] == request["id"] for frame in stream.frames)
