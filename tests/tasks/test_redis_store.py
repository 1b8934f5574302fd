"""RedisTaskStore beyond the shared contract: URLs, atomic limits, key expiry, index cleanup, outages.

The contract itself runs against Redis in ``tests/tasks/test_task_store.py``.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
from urllib.parse import parse_qs, urlsplit

import pytest

from mcp_approval.clock import ManualClock
from mcp_approval.config import ConfigError, StoreSection, load_config
from mcp_approval.hosts import unused_loopback_port
from mcp_approval.storage import StoreUnavailableError
from mcp_approval.tasks import NewTask, TaskOptions, TasksExtension, TaskStatus
from mcp_approval.tasks.models import new_task_id, principal_digest
from mcp_approval.tasks.store import TaskLimitReachedError
from mcp_approval.tasks.store_url import store_from_url
from tests.support.polling import eventually
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio


def prefix_of(url: str) -> str:
    return parse_qs(urlsplit(url).query)["prefix"][0]


def new_task(**fields) -> NewTask:
    base = dict(
        task_id=new_task_id(),
        principal_digest=principal_digest("alice"),
        tool_name="t",
        ttl_ms=60_000,
        poll_interval_ms=100,
        owner="w1",
        lease_ms=10_000,
    )
    base.update(fields)
    return NewTask(**base)


@pytest.fixture
async def redis_store(redis_url):
    from mcp_approval.tasks.redis_store import RedisTaskStore

    clock = ManualClock()
    store = RedisTaskStore.from_url(redis_url, clock=clock)
    await store.open()
    store.clock = clock  # type: ignore[attr-defined]
    yield store
    await store.close()


@pytest.fixture
async def raw(redis_url):
    """A plain client on the same server, to look at what the store wrote."""
    from redis.asyncio import Redis

    from tests.conftest import REDIS_URL

    client = Redis.from_url(REDIS_URL, decode_responses=True)
    yield client
    await client.aclose()


@pytest.mark.redis
async def test_store_url_picks_redis_and_takes_the_prefix_out_of_the_url(redis_url):
    from mcp_approval.tasks.redis_store import RedisTaskStore

    extension = TasksExtension(TaskOptions(), store=store_from_url(redis_url))
    assert isinstance(extension.store, RedisTaskStore)
    assert extension.store.prefix == prefix_of(redis_url)
    assert RedisTaskStore.from_url("redis://127.0.0.1:6379/0").prefix == "mcp-approval:"
    with pytest.raises(ValueError, match="unsupported Redis URL scheme 'http'"):
        RedisTaskStore.from_url("http://127.0.0.1:6379/0")


def test_a_redis_url_without_the_redis_package_says_what_to_install(monkeypatch):
    for name in ["redis", *(name for name in sys.modules if name.startswith("redis."))]:
        monkeypatch.setitem(sys.modules, name, None)  # as if the package were not installed
    monkeypatch.delitem(sys.modules, "mcp_approval.tasks.redis_store", raising=False)
    with pytest.raises(ValueError, match=r"needs the redis package: pip install 'mcp-approval\[redis\]'"):
        store_from_url("redis://127.0.0.1:6379/0")


def test_an_approval_gated_deployment_refuses_a_redis_store():
    from mcp_approval.server.deployment import build_deployment

    config = load_config("examples/treasury/config.toml")
    with pytest.raises(ConfigError, match=r"the store URL given: approval-gated deployments need the SQL store"):
        build_deployment(config, store_url="redis://127.0.0.1:6379/0", base_url="http://127.0.0.1:8000")
    from_file = config.model_copy(update={"store": StoreSection(url="rediss://cache.example:6380/0")})
    with pytest.raises(ConfigError, match=r"\[store\] url: .*lock the task row in the same transaction"):
        build_deployment(from_file, base_url="http://127.0.0.1:8000")


@pytest.mark.redis
async def test_limits_hold_exactly_under_concurrent_creation(redis_store):
    async def attempt(digest: str) -> bool:
        try:
            await redis_store.create(new_task(principal_digest=digest), max_active=8, max_active_per_principal=5)
        except TaskLimitReachedError:
            return False
        return True

    alice, bob = principal_digest("alice"), principal_digest("bob")
    assert sum(await asyncio.gather(*(attempt(alice) for _ in range(20)))) == 5  # max_per_principal, no overshoot
    assert sum(await asyncio.gather(*(attempt(bob) for _ in range(20)))) == 3  # max_tasks: 8 in all
    assert await redis_store.count_active(alice) == 5
    assert await redis_store.count_active() == 8
    finished = await redis_store.create(new_task(status=TaskStatus.COMPLETED, result={"ok": 1}), max_active=8)
    assert finished.terminal  # a task born finished takes no slot


@pytest.mark.redis
async def test_the_caller_is_kept_only_as_a_sha256_digest(redis_store, raw):
    record = await redis_store.create(new_task())
    stored = await raw.hgetall(f"{redis_store.prefix}task:{record.task_id}")
    assert stored["principal_digest"] == hashlib.sha256(b"alice").hexdigest()
    assert "alice" not in stored.values()
    assert await raw.hgetall(f"{redis_store.prefix}active-per-principal") == {stored["principal_digest"]: "1"}


@pytest.mark.redis
async def test_redis_expires_keys_after_the_retention_period_and_extension_moves_it(redis_store, raw):
    from mcp_approval.tasks.redis_store import EXPIRY_MARGIN_MS

    record = await redis_store.create(new_task(ttl_ms=10_000))
    key = f"{redis_store.prefix}task:{record.task_id}"
    requests_key = f"{redis_store.prefix}input-requests:{record.task_id}"
    await redis_store.add_input_requests(record.task_id, [{"method": "elicitation/create"}])
    assert 0 < await raw.pttl(key) <= 10_000 + EXPIRY_MARGIN_MS
    assert 0 < await raw.pttl(requests_key) <= 10_000 + EXPIRY_MARGIN_MS  # input expires with its task
    assert await redis_store.extend_ttl(record.task_id, 600_000)
    assert 10_000 + EXPIRY_MARGIN_MS < await raw.pttl(key) <= 600_000 + EXPIRY_MARGIN_MS
    assert await redis_store.extend_ttl(record.task_id, None)
    assert await raw.pttl(key) == -1  # kept forever
    assert await raw.pttl(requests_key) == -1
    assert not await redis_store.extend_ttl("no-such-task", 1000)


@pytest.mark.redis
async def test_purge_cleans_the_indexes_of_tasks_redis_already_expired(redis_store, raw):
    record = await redis_store.create(new_task(ttl_ms=1000, lease_ms=500))
    keys = [f"{redis_store.prefix}{kind}:{record.task_id}" for kind in ("task", "input-requests", "input-responses")]
    await raw.delete(*keys)  # what Redis key expiry does when no worker swept in time
    assert await redis_store.count_active() == 1  # the index still counts it...
    redis_store.clock.advance(1000)
    assert await redis_store.fail_lapsed({"code": -32603, "message": "lost"}, "lost") == []
    assert await redis_store.purge_expired() == [record.task_id]
    assert await redis_store.count_active() == 0  # ...until the sweep drops it
    assert await redis_store.count_active(record.principal_digest) == 0
    assert [key async for key in raw.scan_iter(match=f"{redis_store.prefix}*")] == []


@pytest.mark.redis
async def test_task_ids_cannot_name_other_keys(redis_store):
    record = await redis_store.create(new_task())
    await redis_store.add_input_requests(record.task_id, [{"method": "elicitation/create"}])
    for forged in (f"{record.task_id}:input-requests", f"../input-requests:{record.task_id}", ""):
        assert await redis_store.get(forged) is None
        assert not await redis_store.transition(forged, TaskStatus.CANCELLED)


@pytest.mark.redis
async def test_a_client_that_decodes_responses_works_too(redis_url):
    from redis.asyncio import Redis

    from mcp_approval.tasks.redis_store import RedisTaskStore
    from tests.conftest import REDIS_URL

    store = RedisTaskStore(lambda: Redis.from_url(REDIS_URL, decode_responses=True), prefix=prefix_of(redis_url))
    await store.open()
    try:
        record = await store.create(new_task(meta={"k": [1, {}], "empty": []}))
        assert await store.transition(record.task_id, TaskStatus.COMPLETED, result={"content": [], "n": 2**60})
        again = await store.get(record.task_id)
    finally:
        await store.close()
    assert again.result == {"content": [], "n": 2**60}  # JSON is never re-encoded by Lua
    assert again.meta == {"k": [1, {}], "empty": []}


@pytest.mark.redis
async def test_an_unreachable_redis_is_store_unavailable_not_unknown(redis_url):
    from mcp_approval.tasks.redis_store import RedisTaskStore

    store = RedisTaskStore.from_url(f"redis://127.0.0.1:{unused_loopback_port()}/0")
    with pytest.raises(StoreUnavailableError, match="store unavailable: ConnectionError"):
        await store.open()
    with pytest.raises(StoreUnavailableError):
        await store.get(new_task_id())
    await store.close()


class CuttableProxy:
    """A TCP forwarder on 127.0.0.1 to the Redis server that can be cut (an outage) and restored."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 6379
        self.cut = False
        self._links: set[asyncio.StreamWriter] = set()
        self._forwarding: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> CuttableProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.listen_port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.cut_off()
        self._server.close()
        # Links a client still holds end with the proxy (the client sees its connections drop).
        for task in list(self._forwarding):
            task.cancel()
        await self._server.wait_closed()

    def url_for(self, url: str) -> str:
        return urlsplit(url)._replace(netloc=f"127.0.0.1:{self.listen_port}").geturl()

    def cut_off(self) -> None:
        self.cut = True
        for writer in list(self._links):
            writer.close()

    def restore(self) -> None:
        self.cut = False

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut:
            writer.close()
            return
        upstream_reader, upstream_writer = await asyncio.open_connection(self.host, self.port)
        if self.cut:  # cut while this link was connecting: it is part of the outage too
            writer.close()
            upstream_writer.close()
            return
        self._links |= {writer, upstream_writer}
        task = asyncio.current_task()
        assert task is not None
        self._forwarding.add(task)
        try:
            await asyncio.gather(
                self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer), return_exceptions=True
            )
        finally:
            self._forwarding.discard(task)
            self._links -= {writer, upstream_writer}
            writer.close()
            upstream_writer.close()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()


@pytest.mark.redis
async def test_redis_down_the_owner_answers_from_memory_and_keeps_its_outcome(serve_inprocess, redis_url):
    from tests.conftest import REDIS_URL

    outage = CuttableProxy(REDIS_URL)
    async with outage as proxy, serve_inprocess(store_url=proxy.url_for(redis_url), threshold_s=0.0) as (wire, tasks):
        created = (await wire.call_tool("slow_job", {"seconds": 1.0, "label": "outage"})).result
        proxy.cut_off()
        try:
            # Each step bounded: the in-process transport has no timeout of its own.
            during = await asyncio.wait_for(wire.get(created["taskId"]), scaled(30))
            cancel = await asyncio.wait_for(wire.cancel(created["taskId"]), scaled(30))
            execution = tasks.runtime.local(created["taskId"])
            assert execution is not None
            # The tool finishes while the store is down.
            assert await execution.wait(scaled(30)) is not None, "the call did not finish"
            finished = await asyncio.wait_for(wire.get(created["taskId"]), scaled(30))
        finally:
            proxy.restore()
        after = (
            await eventually(
                lambda: wire.get(created["taskId"]),
                lambda r: r.status == 200 and r.result["status"] == "completed",
            )
        ).result
    assert during.result["status"] == "working"  # the owner answers from its own view of the task
    assert cancel.error == {"code": -32603, "message": "Task store unavailable"}  # a change needs the store
    assert finished.result["result"]["content"][0]["text"] == "outage finished after 1.0s"
    assert after["result"]["content"][0]["text"] == "outage finished after 1.0s"
