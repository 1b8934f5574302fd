"""Several workers on one Redis store: real subprocesses, real HTTP, a real Redis server.

Each worker is ``python -m mcp_approval.testing.tasks_demo --db redis://...?prefix=...``: the
``store_url`` picks :class:`~mcp_approval.tasks.redis_store.RedisTaskStore`.
"""

from __future__ import annotations

import hashlib
import time
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from mcp_approval.checks.wire import Wire
from tests.support.polling import eventually
from tests.support.process import running
from tests.support.timing import scaled

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.redis]

# Demo server flags: tokens on, quick polls and a 1 s lease grace (lease = 3 x 0.1 s + 1 s).
FLAGS = ("--tokens", "--threshold", "0", "--poll-interval", "0.1", "--lease-grace", "1.0")
LEASE_S = 3 * 0.1 + 1.0
HEARTBEAT_S = 0.1
LOST_WORKER = "The worker running this task stopped responding"


def wire_to(server, token: str = "alice-token") -> Wire:
    return Wire(httpx.AsyncClient(base_url=server.base_url, timeout=scaled(10)), token=token)


def status_is(*statuses):
    return lambda reply: reply.status == 200 and reply.result["status"] in statuses


@pytest.fixture
async def raw(redis_url):
    """A plain client on the workers' server, and the key prefix they share."""
    from redis.asyncio import Redis

    from tests.conftest import REDIS_URL

    client = Redis.from_url(REDIS_URL, decode_responses=True)
    yield client, parse_qs(urlsplit(redis_url).query)["prefix"][0]
    await client.aclose()


@pytest.mark.sep_check("sep-2663-task-access-by-principal")
async def test_any_worker_answers_and_signals_reach_the_owner(redis_url, tmp_path):
    with running(redis_url, tmp_path, *FLAGS, name="a") as a, running(redis_url, tmp_path, *FLAGS, name="b") as b:
        on_a, on_b = wire_to(a), wire_to(b)
        slow = (await on_a.call_tool("slow_job", {"seconds": 60})).result
        assert (await on_b.get(slow["taskId"])).result["status"] == "working"  # B reads A's task
        assert (await on_b.cancel(slow["taskId"])).status == 200  # a signal: only A can stop the tool
        cancelled = (await eventually(lambda: on_a.get(slow["taskId"]), status_is("cancelled"))).result

        asking = (await on_a.call_tool("ask_name", {})).result
        waiting = (await eventually(lambda: on_b.get(asking["taskId"]), status_is("input_required"))).result
        (key,) = waiting["inputRequests"]
        await on_b.update(asking["taskId"], {key: {"action": "accept", "content": {"name": "Ada"}}})
        done = (await eventually(lambda: on_b.get(asking["taskId"]), status_is("completed"))).result

        intruder_get = await wire_to(b, "bob-token").get(asking["taskId"])
        intruder_cancel = await wire_to(a, "bob-token").cancel(slow["taskId"])
    assert cancelled["status"] == "cancelled"
    assert done["result"]["content"][0]["text"] == "Hello, Ada!"
    assert intruder_get.error["code"] == -32602
    assert intruder_cancel.error["code"] == -32602


async def test_a_killed_workers_tasks_read_failed_after_its_lease_and_results_survive(redis_url, tmp_path):
    with running(redis_url, tmp_path, *FLAGS, name="a") as a, running(redis_url, tmp_path, *FLAGS, name="b") as b:
        on_a, on_b = wire_to(a), wire_to(b)
        done = (await on_a.call_tool("required_job", {"label": "kept"})).result
        await eventually(lambda: on_b.get(done["taskId"]), status_is("completed"))
        orphan = (await on_a.call_tool("slow_job", {"seconds": 60})).result
        assert (await on_b.get(orphan["taskId"])).result["status"] == "working"
        a.kill()  # SIGKILL: no shutdown code runs, the lease simply stops being renewed
        killed_at = time.monotonic()
        failed = (await eventually(lambda: on_b.get(orphan["taskId"]), status_is("failed"))).result
        noticed_after_s = time.monotonic() - killed_at
        a.start()  # the same worker again, on the same store
        kept = (await wire_to(a).get(done["taskId"])).result
        orphan_on_a = (await wire_to(a).get(orphan["taskId"])).result
    # The last renewal was at most one heartbeat before the kill; allow for scheduling jitter.
    assert noticed_after_s >= LEASE_S - HEARTBEAT_S - 0.2
    assert failed["error"]["code"] == -32603
    assert failed["statusMessage"] == LOST_WORKER
    assert orphan_on_a["status"] == "failed"
    assert kept["result"]["content"][0]["text"] == "kept done"


async def test_results_stay_until_ttl_then_leave_redis_and_the_caller_is_a_digest(redis_url, tmp_path, raw):
    client, prefix = raw
    with running(redis_url, tmp_path, *FLAGS, "--ttl", "2", name="a") as a:
        wire = wire_to(a)
        created = (await wire.call_tool("required_job", {"label": "brief"})).result
        done = (await eventually(lambda: wire.get(created["taskId"]), status_is("completed"))).result
        stored = await client.hgetall(f"{prefix}task:{created['taskId']}")
        gone = await eventually(
            lambda: wire.get(created["taskId"]),
            lambda r: "error" in r.body,
            timeout_s=done["ttlMs"] / 1000 + scaled(10),
        )
        leftovers = await eventually(
            lambda: _keys(client, prefix), lambda keys: not any(created["taskId"] in key for key in keys)
        )
    assert done["ttlMs"] == 2000
    # The SDK's principal for alice's token is its (client, issuer, subject) triple as compact JSON.
    assert stored["principal_digest"] == hashlib.sha256(b'["alice",null,"alice"]').hexdigest()
    assert not any("alice" in value for value in stored.values())  # no raw identity at rest
    assert gone.error["code"] == -32602  # past its ttl: unknown, like any other id
    assert not await client.zscore(f"{prefix}expiry", created["taskId"])  # the sweep cleaned the index
    assert all(created["taskId"] not in key for key in leftovers)


async def _keys(client, prefix: str) -> list[str]:
    return [key async for key in client.scan_iter(match=f"{prefix}*")]
