"""The Lua scripts behind :class:`~mcp_approval.tasks.redis_store.RedisTaskStore`, and their values.

Redis runs a script atomically, so each script is one contract operation: it reads the task,
checks the guard and writes, with no other client in between. The scripts know nothing of the
state table; the store passes the statuses a guard accepts (from :mod:`~mcp_approval.tasks.states`)
in ``ARGV``, as a comma-framed list such as ``",working,input_required,"``.

Conventions shared by every script:

- Single-task scripts get the same nine ``KEYS``: the task hash, its outstanding input
  requests (hash: key → JSON), its recorded answers (hash: key → JSON), the active index
  (hash: task id → principal digest, ``""`` for none), the per-principal active counts (hash),
  the task lease index (sorted set scored by a task's own lease expiry), the retention index
  (sorted set scored by ``createdAt + ttlMs``), the worker lease index (sorted set: worker id
  scored by its lease expiry) and the owner index (hash: unfinished task id → its worker).
  ``ARGV[1]`` is the task id.
- Batch scripts get the six indexes first, then the task's three keys for each id in ``ARGV``.
- Each worker has one lease (its entry in the worker index) covering every task it owns, and
  two keys named after it: ``owned:<worker>`` (sorted set of its unfinished tasks, scored by the
  task's own lease until the worker's next renewal takes it over, then 0) and
  ``signals:<worker>`` (set of its tasks with a cancel request or answers not taken). Scripts
  derive these names from the worker index's key (same prefix), so with a hash-tagged prefix
  they share the slot of the keys passed in.
- An optional string arrives as ``""`` when absent and as ``"=" .. value`` when present, so an
  empty status message stays distinct from none.
- Times are epoch milliseconds from the store's clock, never Redis ``TIME``, so every worker
  and every test clock agrees with the SQL store's notion of "now".
- JSON documents (results, errors, input) are opaque strings, never decoded in Lua: its JSON
  codec cannot tell ``[]`` from ``{}`` and would round large integers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Final

from mcp_approval.tasks.models import TaskRecord
from mcp_approval.tasks.states import TaskStatus

__all__ = [
    "ADD_INPUT",
    "CREATE",
    "DROP_WORKER",
    "EXTEND_TTL",
    "FAIL_LAPSED",
    "HEARTBEAT",
    "INT_FIELDS",
    "JSON_FIELDS",
    "PURGE",
    "READ",
    "SUBMIT_INPUT",
    "TAKE_INPUT",
    "TRANSITION",
    "blank",
    "decode_record",
    "dumps",
    "input_order",
    "json_hash",
    "opt",
    "pairs",
    "task_fields",
    "text",
]

_COMMON = r"""
local function opt(v)
  if v == '' then return nil end
  return string.sub(v, 2)
end

local function member(csv, value)
  return value ~= nil and value ~= false and string.find(csv, ',' .. value .. ',', 1, true) ~= nil
end

local function set_or_clear(key, field, value)
  if value == nil then redis.call('HDEL', key, field) else redis.call('HSET', key, field, value) end
end

-- Input hashes are created after their task: they expire when it does.
local function follow_expiry(task, key)
  local ms = redis.call('PTTL', task)
  if ms > 0 then redis.call('PEXPIRE', key, ms) end
end

local function deactivate(active, counts, id)
  local principal = redis.call('HGET', active, id)
  if not principal then return end
  redis.call('HDEL', active, id)
  if principal ~= '' and redis.call('HINCRBY', counts, principal, -1) <= 0 then
    redis.call('HDEL', counts, principal)
  end
end

-- The keys named after a worker, from the worker index's key ("<prefix>workers").
local function worker_keys(workers, owner)
  local prefix = string.sub(workers, 1, -8)
  return prefix .. 'owned:' .. owner, prefix .. 'signals:' .. owner
end

-- A task gained a cancel request or answers: its owner reads it at its next renewal.
local function flag_signal(owners, workers, id)
  local owner = redis.call('HGET', owners, id)
  if owner then
    local _, signals = worker_keys(workers, owner)
    redis.call('SADD', signals, id)
  end
end

-- The task leaves its owner's keys (it ended, or is gone: the owner index outlives its hash).
local function disown(owners, workers, id)
  local owner = redis.call('HGET', owners, id)
  if owner then
    local owned, signals = worker_keys(workers, owner)
    redis.call('ZREM', owned, id)
    redis.call('SREM', signals, id)
    redis.call('HDEL', owners, id)
  end
end

local function touch(task, now)
  redis.call('HSET', task, 'updated_at', now)
  redis.call('HINCRBY', task, 'version', 1)
end

-- A terminal write: the lease is released and outstanding input is dropped.
local function finish(task, inreq, inresp, active, counts, leases, workers, owners, id, status, message, now,
                      result, err)
  disown(owners, workers, id)
  redis.call('HSET', task, 'status', status)
  touch(task, now)
  set_or_clear(task, 'status_message', message)
  set_or_clear(task, 'result', result)
  set_or_clear(task, 'error', err)
  redis.call('HDEL', task, 'owner', 'lease_expires_at')
  redis.call('DEL', inreq, inresp)
  redis.call('ZREM', leases, id)
  deactivate(active, counts, id)
end
"""

#: ARGV: id, now, active csv, max_active, max_per_principal, principal, expires_at, redis px,
#: lease expiry, status, then field/value pairs. Returns ``{'ok'}``, ``{'exists'}`` or
#: ``{'limit', name, count}``.
CREATE: Final = (
    _COMMON
    + r"""
local id, now, status = ARGV[1], ARGV[2], ARGV[10]
if redis.call('EXISTS', KEYS[1]) == 1 then return {'exists'} end
local active = member(ARGV[3], status)
local principal = opt(ARGV[6])
if active then
  local total = redis.call('HLEN', KEYS[4])
  if ARGV[4] ~= '' and total >= tonumber(ARGV[4]) then return {'limit', 'max_tasks', total} end
  if principal and ARGV[5] ~= '' then
    local own = tonumber(redis.call('HGET', KEYS[5], principal) or '0')
    if own >= tonumber(ARGV[5]) then return {'limit', 'max_per_principal', own} end
  end
end
redis.call('HSET', KEYS[1], 'status', status, unpack(ARGV, 11))
if active then
  redis.call('HSET', KEYS[4], id, principal or '')
  if principal then redis.call('HINCRBY', KEYS[5], principal, 1) end
  if ARGV[9] ~= '' then redis.call('ZADD', KEYS[6], ARGV[9], id) end
  local owner = redis.call('HGET', KEYS[1], 'owner')
  if owner then
    local owned = worker_keys(KEYS[8], owner)
    redis.call('ZADD', owned, ARGV[9] == '' and 0 or ARGV[9], id)
    redis.call('HSET', KEYS[9], id, owner)
  end
end
if ARGV[7] ~= '' then
  redis.call('ZADD', KEYS[7], ARGV[7], id)
  redis.call('PEXPIRE', KEYS[1], ARGV[8])
end
return {'ok'}
"""
)

#: ARGV: id, '1' to flag a cancel request, active csv. Returns ``{task, requests, answers,
#: worker lease}`` (flat HGETALL lists, then the owner's worker lease or false) or nil when there
#: is no such task.
READ: Final = (
    _COMMON
    + r"""
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
if ARGV[2] == '1' and member(ARGV[3], redis.call('HGET', KEYS[1], 'status')) then
  redis.call('HSET', KEYS[1], 'cancel_requested', '1')
  redis.call('HINCRBY', KEYS[1], 'version', 1)
  flag_signal(KEYS[9], KEYS[8], ARGV[1])
end
local owner = redis.call('HGET', KEYS[1], 'owner')
local worker = owner and redis.call('ZSCORE', KEYS[8], owner)
return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2]), redis.call('HGETALL', KEYS[3]), worker}
"""
)

#: ARGV: id, target, source csv, '1' if target is terminal, message, now, result, error, owner
#: (the fence: when given, the task must still be held by it). Returns 1 when the write happened, else 0.
TRANSITION: Final = (
    _COMMON
    + r"""
local id, target, now = ARGV[1], ARGV[2], ARGV[6]
local status = redis.call('HGET', KEYS[1], 'status')
if not member(ARGV[3], status) then return 0 end
local fence = opt(ARGV[9])
if fence and redis.call('HGET', KEYS[1], 'owner') ~= fence then return 0 end
if ARGV[4] == '1' then
  finish(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[8], KEYS[9], id, target, opt(ARGV[5]),
         now, opt(ARGV[7]), opt(ARGV[8]))
else
  redis.call('HSET', KEYS[1], 'status', target)
  touch(KEYS[1], now)
  set_or_clear(KEYS[1], 'status_message', opt(ARGV[5]))
end
return 1
"""
)

#: ARGV: id, active csv, now, input_required status, request JSON... Returns the new keys, or
#: nil when the task is terminal or gone. Keys come from a per-task counter: never reused.
ADD_INPUT: Final = (
    _COMMON
    + r"""
if not member(ARGV[2], redis.call('HGET', KEYS[1], 'status')) then return false end
local seq = tonumber(redis.call('HGET', KEYS[1], 'input_seq') or '0')
local keys = {}
for i = 5, #ARGV do
  seq = seq + 1
  local key = 'in-' .. seq
  redis.call('HSET', KEYS[2], key, ARGV[i])
  keys[#keys + 1] = key
end
if #keys > 0 then follow_expiry(KEYS[1], KEYS[2]) end
redis.call('HSET', KEYS[1], 'input_seq', seq, 'status', ARGV[4])
touch(KEYS[1], ARGV[3])
return keys
"""
)

#: ARGV: id, active csv, now, input_required status, working status, then key/JSON pairs.
#: Returns the keys accepted (those outstanding), in the order given.
SUBMIT_INPUT: Final = (
    _COMMON
    + r"""
local status = redis.call('HGET', KEYS[1], 'status')
if not member(ARGV[2], status) then return {} end
local accepted = {}
for i = 6, #ARGV, 2 do
  if redis.call('HDEL', KEYS[2], ARGV[i]) == 1 then
    redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
    accepted[#accepted + 1] = ARGV[i]
  end
end
if #accepted == 0 then return accepted end
follow_expiry(KEYS[1], KEYS[3])
flag_signal(KEYS[9], KEYS[8], ARGV[1])
if status == ARGV[4] and redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('HSET', KEYS[1], 'status', ARGV[5])
end
touch(KEYS[1], ARGV[3])
return accepted
"""
)

#: ARGV: id, now. Returns the answers not yet taken (flat key/JSON list) and removes them.
TAKE_INPUT: Final = (
    _COMMON
    + r"""
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
local answers = redis.call('HGETALL', KEYS[3])
if #answers == 0 then return answers end
redis.call('DEL', KEYS[3])
touch(KEYS[1], ARGV[2])
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner and redis.call('HGET', KEYS[1], 'cancel_requested') ~= '1' then
  local _, signals = worker_keys(KEYS[8], owner)
  redis.call('SREM', signals, ARGV[1])
end
return answers
"""
)

#: ARGV: id, ttl_ms ('' for unlimited), now, expiry margin ms. Returns 1, or 0 if gone.
EXTEND_TTL: Final = (
    _COMMON
    + r"""
local created = redis.call('HGET', KEYS[1], 'created_at')
if not created then return 0 end
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], 'ttl_ms')
  redis.call('ZREM', KEYS[7], ARGV[1])
  redis.call('PERSIST', KEYS[1])
  redis.call('PERSIST', KEYS[2])
  redis.call('PERSIST', KEYS[3])
else
  local expires = tonumber(created) + tonumber(ARGV[2])
  local px = string.format('%d', math.max(expires - tonumber(ARGV[3]), 0) + tonumber(ARGV[4]))
  redis.call('HSET', KEYS[1], 'ttl_ms', ARGV[2])
  redis.call('ZADD', KEYS[7], string.format('%d', expires), ARGV[1])
  redis.call('PEXPIRE', KEYS[1], px)
  redis.call('PEXPIRE', KEYS[2], px)
  redis.call('PEXPIRE', KEYS[3], px)
end
redis.call('HINCRBY', KEYS[1], 'version', 1)
return 1
"""
)

#: KEYS: the task lease index, the worker lease index. ARGV: worker, lease expiry, active csv.
#: Renews the worker's one lease, takes over the own leases of its tasks created since its last
#: renewal, and returns ``{id, cancel, has_input}`` per task of its with a pending signal.
HEARTBEAT: Final = (
    _COMMON
    + r"""
local owner, expiry = ARGV[1], ARGV[2]
local owned, signals = worker_keys(KEYS[2], owner)
local prefix = string.sub(KEYS[2], 1, -8)
redis.call('ZADD', KEYS[2], expiry, owner)
for _, id in ipairs(redis.call('ZRANGEBYSCORE', owned, '(0', '+inf')) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZADD', owned, 0, id)
end
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', signals)) do
  local row = redis.call('HMGET', prefix .. 'task:' .. id, 'owner', 'status', 'cancel_requested')
  local cancel = row[3] == '1'
  local input = redis.call('EXISTS', prefix .. 'input-responses:' .. id) == 1
  if row[1] == owner and member(ARGV[3], row[2]) and (cancel or input) then
    out[#out + 1] = {id, cancel and 1 or 0, input and 1 or 0}
  else
    redis.call('SREM', signals, id)
  end
end
return out
"""
)

#: KEYS: active, counts, leases, expiry, workers, owners, then three keys per id. ARGV: now, active csv,
#: failed status, message, error JSON, ids... Fails each task still active whose own lease (if
#: not taken over) and owner's worker lease have both lapsed; drops index entries of tasks that
#: are gone or already finished. Returns the ids failed.
FAIL_LAPSED: Final = (
    _COMMON
    + r"""
local now = tonumber(ARGV[1])
local failed = {}
for i = 6, #ARGV do
  local base = 6 + 3 * (i - 6)
  local task, id = KEYS[base + 1], ARGV[i]
  local row = redis.call('HMGET', task, 'status', 'owner')
  local own = redis.call('ZSCORE', KEYS[3], id)
  local worker = row[2] and redis.call('ZSCORE', KEYS[5], row[2])
  local held = (own and tonumber(own) >= now) or (worker and tonumber(worker) >= now)
  if member(ARGV[2], row[1]) and (own or worker) and not held then
    finish(task, KEYS[base + 2], KEYS[base + 3], KEYS[1], KEYS[2], KEYS[3], KEYS[5], KEYS[6], id, ARGV[3],
           opt(ARGV[4]), ARGV[1], nil, ARGV[5])
    failed[#failed + 1] = id
  elseif not row[1] or not member(ARGV[2], row[1]) then
    redis.call('ZREM', KEYS[3], id)
    if not row[1] then
      deactivate(KEYS[1], KEYS[2], id)
      disown(KEYS[6], KEYS[5], id)
    end
  end
end
return failed
"""
)

#: KEYS as for FAIL_LAPSED. ARGV: now, ids... Deletes each task whose retention period has
#: elapsed (re-checked here: it may have been extended) and its index entries, including
#: those of tasks Redis already expired. Returns the ids purged.
PURGE: Final = (
    _COMMON
    + r"""
local now = tonumber(ARGV[1])
local purged = {}
for i = 2, #ARGV do
  local base = 6 + 3 * (i - 2)
  local id = ARGV[i]
  local expires = redis.call('ZSCORE', KEYS[4], id)
  if expires and tonumber(expires) <= now then
    disown(KEYS[6], KEYS[5], id)
    redis.call('DEL', KEYS[base + 1], KEYS[base + 2], KEYS[base + 3])
    redis.call('ZREM', KEYS[4], id)
    redis.call('ZREM', KEYS[3], id)
    deactivate(KEYS[1], KEYS[2], id)
    purged[#purged + 1] = id
  end
end
return purged
"""
)

#: KEYS: the worker lease index, the worker's ``owned`` set. ARGV: worker, now. Drops the lease
#: entry of a worker whose lease lapsed once none of its tasks remains taken over by it (its
#: tasks not taken over yet keep their own leases). Returns 1 if dropped.
DROP_WORKER: Final = r"""
local lease = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not lease or tonumber(lease) >= tonumber(ARGV[2]) then return 0 end
if redis.call('ZCOUNT', KEYS[2], 0, 0) > 0 then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
return 1
"""

# -- the values scripts exchange ----------------------------------------------------------

#: Task hash fields holding integers and JSON documents; every other field is text.
INT_FIELDS: Final = ("created_at", "updated_at", "ttl_ms", "poll_interval_ms", "lease_expires_at")
JSON_FIELDS: Final = ("result", "error", "meta")


def dumps(value: Any) -> str:
    """Compact JSON, as the SQL store writes it."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def text(value: bytes | str | int) -> str:
    """A reply element as text, whether or not the client decodes responses."""
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def opt(value: str | None) -> str:
    """An optional string for a script: ``""`` for none, else ``"="`` + value."""
    return "" if value is None else "=" + value


def blank(value: int | None) -> str | int:
    """An optional number for a script: ``""`` for none."""
    return "" if value is None else value


def task_fields(record: TaskRecord) -> list[str | int]:
    """The task hash's field/value pairs (``status`` aside); ``None`` values are left out."""
    values: dict[str, str | int | None] = {
        "task_id": record.task_id,
        "principal_digest": record.principal_digest,
        "tool_name": record.tool_name,
        "status_message": record.status_message,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "ttl_ms": record.ttl_ms,
        "poll_interval_ms": record.poll_interval_ms,
        "input_seq": 0,
        "cancel_requested": 0,
        "owner": record.owner,
        "lease_expires_at": record.lease_expires_at,
        "version": 0,
        "handler": record.handler,
    }
    values.update(
        {name: None if getattr(record, name) is None else dumps(getattr(record, name)) for name in JSON_FIELDS}
    )
    return [part for name, value in values.items() if value is not None for part in (name, value)]


def pairs(flat: Iterable[bytes | str]) -> dict[str, str]:
    """A flat ``HGETALL`` list as a dict of text."""
    items = [text(item) for item in flat]
    return dict(zip(items[::2], items[1::2], strict=True))


def input_order(key: str) -> tuple[int, str]:
    """Sort key of input keys: ``in-2`` before ``in-10``, the order they were issued."""
    return (len(key), key)


def json_hash(flat: Iterable[bytes | str]) -> dict[str, Any]:
    """An input hash (key → JSON) decoded, in the order its keys were issued."""
    values = pairs(flat)
    return {key: json.loads(values[key]) for key in sorted(values, key=input_order)}


def decode_record(reply: Any) -> TaskRecord | None:
    """A :class:`TaskRecord` from the READ script's reply (``None`` when there is no task)."""
    if reply is None:
        return None
    task_flat, requests, responses, *worker = reply
    row = pairs(task_flat)
    numbers = {name: None if name not in row else int(row[name]) for name in INT_FIELDS}
    if row.get("owner") is not None and worker and worker[0]:
        # The task's lease ends with the later of its own and its owner's worker lease.
        numbers["lease_expires_at"] = max(numbers["lease_expires_at"] or 0, int(float(text(worker[0]))))
    documents = {name: None if name not in row else json.loads(row[name]) for name in JSON_FIELDS}
    return TaskRecord(
        task_id=row["task_id"],
        principal_digest=row.get("principal_digest"),
        tool_name=row["tool_name"],
        status=TaskStatus(row["status"]),
        created_at=int(row["created_at"]),
        updated_at=int(row["updated_at"]),
        ttl_ms=numbers["ttl_ms"],
        poll_interval_ms=numbers["poll_interval_ms"],
        status_message=row.get("status_message"),
        result=documents["result"],
        error=documents["error"],
        input_requests=json_hash(requests),
        input_responses=json_hash(responses),
        input_seq=int(row.get("input_seq", 0)),
        cancel_requested=row.get("cancel_requested") == "1",
        owner=row.get("owner"),
        lease_expires_at=numbers["lease_expires_at"],
        version=int(row.get("version", 0)),
        handler=row.get("handler"),
        meta=documents["meta"],
    )
