"""Restart survival, dead workers and two workers on one store: real subprocesses, real HTTP."""

from __future__ import annotations

import httpx
import pytest

from mcp_approval.checks.wire import Wire
from tests.support.polling import eventually
from tests.support.process import running
from tests.support.timing import scaled

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

# Demo server flags: tokens on, quick polls and a 1 s lease grace (lease = 3 x 0.1 s + 1 s).
FLAGS = ("--tokens", "--threshold", "0", "--poll-interval", "0.1", "--lease-grace", "1.0")


def wire_to(server, token: str = "alice-token") -> Wire:
    return Wire(httpx.AsyncClient(base_url=server.base_url, timeout=scaled(10)), token=token)


def status_is(*statuses):
    return lambda reply: reply.status == 200 and reply.result["status"] in statuses


async def test_tasks_survive_kill_and_restart_and_orphans_fail(db_url, tmp_path):
    with running(db_url, tmp_path, *FLAGS) as server:
        wire = wire_to(server)
        done = (await wire.call_tool("required_job", {"label": "kept"})).result
        await eventually(lambda: wire.get(done["taskId"]), status_is("completed"))
        orphan = (await wire.call_tool("slow_job", {"seconds": 60})).result
        assert orphan["status"] == "working"
        server.restart()  # SIGKILL, then a new process on the same database
        wire = wire_to(server)
        kept = (await wire.get(done["taskId"])).result
        failed = (await eventually(lambda: wire.get(orphan["taskId"]), status_is("failed"))).result
        other = await wire_to(server, "bob-token").get(done["taskId"])
    assert kept["status"] == "completed"
    assert kept["result"]["content"][0]["text"] == "kept done"
    assert failed["error"]["code"] == -32603
    assert failed["statusMessage"] == "The worker running this task stopped responding"
    assert other.error["code"] == -32602  # still bound to its principal after the restart


async def test_graceful_shutdown_cancels_running_tasks(db_url, tmp_path):
    with running(db_url, tmp_path, *FLAGS, name="first") as server:
        wire = wire_to(server)
        task = (await wire.call_tool("slow_job", {"seconds": 60})).result
        # uvicorn shuts down gracefully, then re-raises the SIGTERM it caught
        assert server.terminate() in (0, -15)
    with running(db_url, tmp_path, *FLAGS, name="second") as server:
        after = (await wire_to(server).get(task["taskId"])).result
    assert after["status"] == "cancelled"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def shared_db(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.mark.sep_check("sep-2663-task-access-by-principal")
async def test_any_worker_answers_and_routes_cancel_and_update_to_the_owner(shared_db, tmp_path):
    with running(shared_db, tmp_path, *FLAGS, name="a") as a, running(shared_db, tmp_path, *FLAGS, name="b") as b:
        on_a, on_b = wire_to(a), wire_to(b)
        slow = (await on_a.call_tool("slow_job", {"seconds": 60})).result
        assert (await on_b.get(slow["taskId"])).result["status"] == "working"  # B reads A's task
        assert (await on_b.cancel(slow["taskId"])).status == 200
        cancelled = await eventually(lambda: on_a.get(slow["taskId"]), status_is("cancelled"))

        asking = (await on_a.call_tool("ask_name", {})).result
        waiting = (await eventually(lambda: on_b.get(asking["taskId"]), status_is("input_required"))).result
        (key,) = waiting["inputRequests"]
        await on_b.update(asking["taskId"], {key: {"action": "accept", "content": {"name": "Ada"}}})
        done = (await eventually(lambda: on_b.get(asking["taskId"]), status_is("completed"))).result

        intruder = await wire_to(b, "bob-token").cancel(asking["taskId"])
    assert cancelled.result["status"] == "cancelled"
    assert done["result"]["content"][0]["text"] == "Hello, Ada!"
    assert intruder.error["code"] == -32602
