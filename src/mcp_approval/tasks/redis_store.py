"""The Redis implementation of :class:`~mcp_approval.tasks.store.TaskStore`, for several workers.

Every contract operation is one Lua script (:mod:`mcp_approval.tasks.redis_scripts`), run with
``EVALSHA`` and loaded on first use, so each read-check-write is atomic on the server: status
changes are compare-and-set against the state table, terminal statuses absorb every later
write, limits are counted in the same script as the insert (no overshoot under races).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, cast
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

try:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import ReadOnlyError
    from redis.exceptions import TimeoutError as RedisTimeoutError
except ModuleNotFoundError as exc:  # redis is an optional extra: say which one
    raise ModuleNotFoundError(
        f"RedisTaskStore needs the redis package ({exc}): pip install 'mcp-approval[redis]'", name=exc.name
    ) from exc

from mcp_approval.clock import Clock, SystemClock
from mcp_approval.storage import StoreUnavailableError
from mcp_approval.tasks import redis_scripts
from mcp_approval.tasks.models import TaskRecord
from mcp_approval.tasks.redis_scripts import blank, decode_record, dumps, json_hash, opt, task_fields, text
from mcp_approval.tasks.states import ACTIVE, TERMINAL, TaskStatus, sources_of
from mcp_approval.tasks.store import REDIS_URL_SCHEMES, NewTask, TaskLimitReachedError, TaskSignal

__all__ = ["DEFAULT_PREFIX", "EXPIRY_MARGIN_MS", "RedisTaskStore"]

#: The key prefix used when none is given.
DEFAULT_PREFIX: Final = "mcp-approval:"
#: Redis deletes a task's keys this long after its retention period, as a backstop for when no
#: worker sweeps; normally a worker's :meth:`RedisTaskStore.purge_expired` deletes them first.
EXPIRY_MARGIN_MS: Final = 60_000
#: How many tasks one batch script handles, so no script holds the server for long.
_BATCH: Final = 256
#: Socket timeouts of clients built by :meth:`RedisTaskStore.from_url` (a URL may override them).
_SOCKET_TIMEOUT_S: Final = 5.0
_UNAVAILABLE = (RedisConnectionError, RedisTimeoutError, ReadOnlyError, OSError)
_ACTIVE_CSV: Final = "," + ",".join(sorted(status.value for status in ACTIVE)) + ","
_SOURCES_CSV: Final = {
    target: "," + ",".join(sorted(source.value for source in sources_of(target))) + "," for target in TaskStatus
}
_SCRIPT_NAMES: Final = (
    *("CREATE", "READ", "TRANSITION", "ADD_INPUT", "SUBMIT_INPUT", "TAKE_INPUT"),
    *("EXTEND_TTL", "HEARTBEAT", "FAIL_LAPSED", "PURGE", "DROP_WORKER"),
)


class RedisTaskStore:
    """Task state in Redis, shared by every worker pointed at it.

    ``TasksExtension(options, store=RedisTaskStore(lambda: Redis.from_url(url)))`` on every worker (or
    ``store=store_from_url("redis://host:6379/0")``). The worker running a task writes its state;
    any worker reads it for ``tasks/get``, and records ``tasks/update`` answers and cancel requests
    as signals its owner collects at its next heartbeat. The store only mirrors task state: it
    never decides an approval.

    Approval-gated deployments need :class:`~mcp_approval.tasks.sql_store.SqlTaskStore`: the
    approval layer keeps its workflow rows in the same SQL database as the task rows and locks
    the task row in the same transaction, which this store cannot offer.

    Results stay in Redis until the task's ``ttlMs`` elapses, so protect it like the approval
    database (``requirepass``/ACLs, ``rediss://`` across hosts); the caller is stored only as the
    SHA-256 digest :class:`~mcp_approval.tasks.store.NewTask` carries. On Redis Cluster, use a
    prefix with a hash tag (``"{mcp-approval}:"``) so a script's keys share one slot.

    Args:
        connect: builds the client; called by :meth:`open` (again after :meth:`close`).
        prefix: the start of every key this store writes; workers sharing tasks share it.
        clock: the source of time for timestamps, leases and expiry.
    """

    def __init__(
        self, connect: Callable[[], Redis], *, prefix: str = DEFAULT_PREFIX, clock: Clock | None = None
    ) -> None:
        self._connect = connect
        self.prefix = prefix
        self._clock = clock or SystemClock()
        self._client: Redis | None = None
        self._scripts: dict[str, AsyncScript] = {}
        self._indexes = [
            f"{prefix}{name}" for name in ("active", "active-per-principal", "leases", "expiry", "workers", "owners")
        ]

    @classmethod
    def from_url(cls, url: str, *, clock: Clock | None = None) -> RedisTaskStore:
        """A store for ``redis://[:password@]host[:port][/db][?prefix=KEYPREFIX]`` (or ``rediss://``).

        ``prefix`` is taken out of the query; the rest of the URL goes to ``Redis.from_url``.

        Raises:
            ValueError: for another scheme, naming it.
        """
        parts = urlsplit(url)
        if parts.scheme not in REDIS_URL_SCHEMES:
            raise ValueError(f"unsupported Redis URL scheme {parts.scheme!r}: use redis:// or rediss://")
        query = parse_qsl(parts.query, keep_blank_values=True)
        prefix = next((value for name, value in query if name == "prefix"), DEFAULT_PREFIX)
        rest = urlunsplit(parts._replace(query=urlencode([(k, v) for k, v in query if k != "prefix"])))

        def connect() -> Redis:
            return Redis.from_url(rest, socket_connect_timeout=_SOCKET_TIMEOUT_S, socket_timeout=_SOCKET_TIMEOUT_S)

        return cls(connect, prefix=prefix, clock=clock)

    @property
    def connector(self) -> Callable[[], Redis]:
        """Makes a new client for this store's server (change signals open their own)."""
        return self._connect

    async def open(self) -> None:
        """Connect and check that the server answers; scripts load on first use."""
        if self._client is None:
            self._client = self._connect()
            self._scripts = {name: self._client.register_script(getattr(redis_scripts, name)) for name in _SCRIPT_NAMES}
        try:
            await self._client.ping()
        except _UNAVAILABLE as exc:
            raise _unavailable(exc) from exc

    async def close(self) -> None:
        """Release connections."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    async def create(
        self, task: NewTask, *, max_active: int | None = None, max_active_per_principal: int | None = None
    ) -> TaskRecord:
        """Store a task; the limits count unfinished tasks in the same script as the insert."""
        now = self._clock.now_ms()
        terminal = task.status in TERMINAL
        record = TaskRecord(
            task_id=task.task_id,
            principal_digest=task.principal_digest,
            tool_name=task.tool_name,
            status=task.status,
            created_at=now,
            updated_at=now,
            ttl_ms=task.ttl_ms,
            poll_interval_ms=task.poll_interval_ms,
            status_message=task.status_message,
            result=task.result,
            error=task.error,
            owner=None if terminal else task.owner,
            lease_expires_at=None if terminal or task.lease_ms is None else now + task.lease_ms,
            handler=task.handler,
            meta=task.meta,
        )
        expires = record.expires_at
        reply = await self._run(
            "CREATE",
            task.task_id,
            now,
            _ACTIVE_CSV,
            blank(max_active),
            blank(max_active_per_principal),
            opt(task.principal_digest),
            blank(expires),
            blank(None if expires is None else max(expires - now, 0) + EXPIRY_MARGIN_MS),
            blank(record.lease_expires_at),
            task.status.value,
            *task_fields(record),
        )
        outcome = [text(part) for part in reply]
        if outcome[0] == "limit":
            raise TaskLimitReachedError(outcome[1], int(outcome[2]))
        if outcome[0] == "exists":
            raise ValueError(f"a task with id {task.task_id[:8]}... already exists")
        return record

    async def get(self, task_id: str) -> TaskRecord | None:
        """Read one task (its hash and input hashes in one atomic read)."""
        return decode_record(await self._run("READ", task_id, "0", _ACTIVE_CSV))

    async def transition(
        self,
        task_id: str,
        target: TaskStatus,
        *,
        status_message: str | None = None,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        owner: str | None = None,
    ) -> bool:
        """Compare-and-set the status against the state table (fenced on ``owner`` when given)."""
        terminal = target in TERMINAL
        written = await self._run(
            "TRANSITION",
            task_id,
            target.value,
            _SOURCES_CSV[target],
            "1" if terminal else "0",
            opt(status_message),
            self._clock.now_ms(),
            opt(dumps(result) if terminal and result is not None else None),
            opt(dumps(error) if terminal and error is not None else None),
            opt(owner),
        )
        return bool(written)

    async def add_input_requests(self, task_id: str, requests: Sequence[Mapping[str, Any]]) -> list[str] | None:
        """Issue requests under fresh keys ``in-<n>`` and move to ``input_required``."""
        keys = await self._run(
            "ADD_INPUT",
            task_id,
            _ACTIVE_CSV,
            self._clock.now_ms(),
            TaskStatus.INPUT_REQUIRED.value,
            *(dumps(dict(request)) for request in requests),
        )
        return None if keys is None else [text(key) for key in keys]

    async def submit_input_responses(self, task_id: str, responses: Mapping[str, Any]) -> list[str]:
        """Record answers for outstanding keys; the rest are ignored."""
        pairs = [part for key, value in responses.items() for part in (key, dumps(value))]
        accepted = await self._run(
            "SUBMIT_INPUT",
            task_id,
            _ACTIVE_CSV,
            self._clock.now_ms(),
            TaskStatus.INPUT_REQUIRED.value,
            TaskStatus.WORKING.value,
            *pairs,
        )
        return [text(key) for key in accepted]

    async def take_input_responses(self, task_id: str) -> dict[str, Any]:
        """Remove and return recorded answers."""
        return json_hash(await self._run("TAKE_INPUT", task_id, self._clock.now_ms()))

    async def request_cancel(self, task_id: str) -> TaskRecord | None:
        """Flag a non-terminal task for cancellation; its owner sees the flag at its next heartbeat."""
        return decode_record(await self._run("READ", task_id, "1", _ACTIVE_CSV))

    async def extend_ttl(self, task_id: str, ttl_ms: int | None) -> bool:
        """Set a new retention period counted from creation (and move the Redis key expiry with it)."""
        if ttl_ms is not None and ttl_ms <= 0:
            raise ValueError("ttl_ms must be positive or None")
        done = await self._run("EXTEND_TTL", task_id, blank(ttl_ms), self._clock.now_ms(), EXPIRY_MARGIN_MS)
        return bool(done)

    async def heartbeat(self, owner: str, task_ids: Sequence[str], lease_ms: int) -> list[TaskSignal]:
        """Renew ``owner``'s one worker lease and read its pending signals, in one script.

        The script's work does not grow with the number of tasks held: it renews one entry,
        takes over the leases of the tasks created since the last renewal and reads the
        worker's signal set. ``task_ids`` only tells whether the worker holds any task.
        """
        if not task_ids:
            return []
        keys = [self._indexes[2], self._indexes[4]]
        rows = await self._call("HEARTBEAT", keys, [owner, self._clock.now_ms() + lease_ms, _ACTIVE_CSV])
        return [
            TaskSignal(task_id=text(task_id), cancel_requested=bool(cancel), has_input_responses=bool(has_input))
            for task_id, cancel, has_input in rows
        ]

    async def fail_lapsed(self, error: dict[str, Any], status_message: str) -> list[str]:
        """Fail every active task whose own lease and worker lease have lapsed (re-checked per batch).

        The candidates are the tasks whose own lease lapsed before their worker took it over,
        and the tasks of each worker whose lease lapsed; that worker's entry is then dropped.
        """
        now = self._clock.now_ms()
        head: list[str | int] = [now, _ACTIVE_CSV, TaskStatus.FAILED.value, opt(status_message), dumps(error)]
        failed = await self._batches("FAIL_LAPSED", await self._ids_scored_below(self._indexes[2], f"({now}"), head)
        for worker in await self._ids_scored_below(self._indexes[4], f"({now}"):
            owned = self._key("owned", worker)
            failed += await self._batches("FAIL_LAPSED", await self._ids_scored_below(owned, "+inf"), head)
            await self._call("DROP_WORKER", [self._indexes[4], owned], [worker, now])
        return failed

    async def purge_expired(self) -> list[str]:
        """Delete tasks past their retention period, with their index entries."""
        now = self._clock.now_ms()
        return await self._batches("PURGE", await self._ids_scored_below(self._indexes[3], now), [now])

    async def count_active(self, principal_digest: str | None = None) -> int:
        """Count non-terminal tasks, overall or for one principal."""
        client = self._require_client()
        try:
            if principal_digest is None:
                return int(await client.hlen(self._indexes[0]))
            return int(await client.hget(self._indexes[1], principal_digest) or 0)
        except _UNAVAILABLE as exc:
            raise _unavailable(exc) from exc

    # -- plumbing --------------------------------------------------------------------------

    def _key(self, kind: str, task_id: str) -> str:
        # The id comes last and each kind differs before it, so no id can name another key.
        return f"{self.prefix}{kind}:{task_id}"

    def _task_keys(self, task_id: str) -> list[str]:
        return [self._key(kind, task_id) for kind in ("task", "input-requests", "input-responses")]

    def _require_client(self) -> Redis:
        if self._client is None:
            raise RuntimeError("the task store is not open")
        return self._client

    async def _run(self, script: str, task_id: str, *args: str | int) -> Any:
        """Run a single-task script: the task's three keys and the six indexes."""
        return await self._call(script, self._task_keys(task_id) + self._indexes, [task_id, *args])

    async def _call(self, script: str, keys: list[str], args: Sequence[str | int]) -> Any:
        client = self._require_client()
        try:
            return await self._scripts[script](keys=keys, args=args, client=client)
        except _UNAVAILABLE as exc:
            raise _unavailable(exc) from exc

    async def _ids_scored_below(self, index: str, bound: str | int) -> list[str]:
        client = self._require_client()
        try:
            members = cast("list[bytes | str]", await client.zrangebyscore(index, "-inf", bound))
            return [text(member) for member in members]
        except _UNAVAILABLE as exc:
            raise _unavailable(exc) from exc

    async def _batches(self, script: str, ids: list[str], head: list[str | int]) -> list[str]:
        done: list[str] = []
        for start in range(0, len(ids), _BATCH):
            batch = ids[start : start + _BATCH]
            keys = self._indexes + [key for task_id in batch for key in self._task_keys(task_id)]
            reply = await self._call(script, keys, [*head, *batch])
            done += [text(task_id) for task_id in reply]
        return done


def _unavailable(exc: BaseException) -> StoreUnavailableError:
    return StoreUnavailableError(f"store unavailable: {type(exc).__name__}: {exc}".splitlines()[0])
