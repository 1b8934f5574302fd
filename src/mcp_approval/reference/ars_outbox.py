"""The reference ARS's durable callback outbox (``arap_callbacks``).

When a task with a ``callback.endpoint`` ends (approved, denied, cancelled or expired),
:func:`queue_callback` writes its callback row in the very transaction that ends it (the local
backend's :data:`~mcp_approval.backends.TerminalHook`), so a committed end always has its
callback owed, across crashes and restarts.

:class:`CallbackOutbox` delivers the rows: every worker looks every ``poll_interval_s`` (and at
once when woken), claims the due rows with a compare-and-set on the lease columns (so two
workers never send one row in normal operation), POSTs each, and marks it delivered. A failed
attempt releases the claim and schedules the next one with exponential backoff; after
``max_attempts`` attempts or ``max_age_s`` the row is abandoned (logged at WARNING). A worker
killed mid-attempt leaves its lease to expire, and the row is sent again: a duplicate is
harmless, as a callback is only a wake-up (the PEP reads the status) and each attempt is signed
afresh. A ``409`` answer (the receiver already accepted this very signature) counts as delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from dataclasses import dataclass
from typing import Any, Final

import httpx2
from sqlalchemy import Connection, delete, or_, select, update

from mcp_approval._background import finish_or_cancel
from mcp_approval.backends.callbacks import SIGNATURE_HEADER, sign_callback
from mcp_approval.clock import Clock
from mcp_approval.reference.arap_callbacks import origin
from mcp_approval.reference.ars_schema import arap_callbacks_table, arap_tasks_table
from mcp_approval.storage.database import Database

__all__ = ["CallbackOutbox", "CallbackRow", "callback_rows", "queue_callback"]

logger = logging.getLogger("mcp_approval.reference")

_C, _T = arap_callbacks_table, arap_tasks_table
#: Rows one worker claims (and attempts at once) per round.
_BATCH: Final = 20


def queue_callback(conn: Connection, request_id: str, status: str, now: int) -> None:
    """Owe the callback of the task carried by ``request_id``, if it asked for one (in ``conn``'s transaction)."""
    task = conn.execute(
        select(_T.c.task_id, _T.c.callback_endpoint, _T.c.callback_state).where(_T.c.request_id == request_id)
    ).first()
    if task is None or task.callback_endpoint is None:
        return  # no task yet (the submission answers the end itself) or no callback asked for
    if conn.execute(select(_C.c.task_id).where(_C.c.task_id == task.task_id)).first() is not None:
        return  # a task ends once; this only guards against a second writer
    values = {"task_id": task.task_id, "endpoint": task.callback_endpoint, "state": task.callback_state}
    conn.execute(_C.insert(), {**values, "status": status, "created_at": now, "attempts": 0, "next_attempt_at": now})


@dataclass(frozen=True)
class CallbackRow:
    """One owed (or settled) callback."""

    task_id: str
    endpoint: str
    state: str | None
    status: str
    created_at: int
    attempts: int
    next_attempt_at: int | None
    delivered_at: int | None
    abandoned_at: int | None
    last_error: str | None


async def callback_rows(database: Database) -> list[CallbackRow]:
    """Every row of ``arap_callbacks``, oldest first (for inspection)."""
    fields = [column.name for column in _C.columns if column.name not in ("lease_owner", "lease_expires_at")]
    query = select(*(_C.c[name] for name in fields)).order_by(_C.c.created_at, _C.c.task_id)
    rows = await database.read(lambda conn: [dict(row) for row in conn.execute(query).mappings()])
    return [CallbackRow(**row) for row in rows]


class CallbackOutbox:
    """Delivers ``arap_callbacks`` rows (see the module docstring).

    Args:
        database: the ARS's store.
        secret: the shared HMAC secret.
        requests_endpoint: the Access Request endpoint (a task's status endpoint is below it).
        clock: the source of time (schedules, leases, signature timestamps).
        poll_interval_s: how often a worker looks for due rows.
        lease_s: how long a claim holds (longer than one attempt's timeout).
        backoff_s: the delay after the first failed attempt; it doubles after each, up to ``max_backoff_s``.
        max_attempts: attempts before a row is abandoned.
        max_age_s: age after which a row still undelivered is abandoned.
        timeout_s: bound on one HTTP attempt.

    Raises:
        ValueError: a lease not longer than twice the attempt timeout (it could lapse mid-attempt).
    """

    def __init__(
        self,
        database: Database,
        *,
        secret: str,
        requests_endpoint: str,
        clock: Clock,
        poll_interval_s: float = 1.0,
        lease_s: float = 30.0,
        backoff_s: float = 1.0,
        max_backoff_s: float = 300.0,
        max_attempts: int = 12,
        max_age_s: float = 86_400.0,
        timeout_s: float = 10.0,
    ) -> None:
        if lease_s <= 2 * timeout_s:
            raise ValueError(f"lease_s ({lease_s}) must be longer than twice timeout_s ({timeout_s})")
        self._database = database
        self._secret = secret
        self._endpoint = requests_endpoint
        self._clock = clock
        self._poll_s = poll_interval_s
        self._lease_ms = int(lease_s * 1000)
        self._backoff_ms, self._max_backoff_ms = int(backoff_s * 1000), int(max_backoff_s * 1000)
        self._max_attempts, self._max_age_ms = max_attempts, int(max_age_s * 1000)
        self._timeout_s = timeout_s
        #: This worker's lease owner id.
        self.owner = secrets.token_hex(8)
        self._client: httpx2.AsyncClient | None = None
        self._wake = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Deliver in the background (rows left by a previous process included)."""
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name="arap-callback-outbox")

    async def stop(self) -> None:
        """Stop delivering and close the client.

        The round in flight gets a grace to finish (see :mod:`mcp_approval._background`); a row
        whose attempt is cancelled then is sent again once its lease expires.
        """
        self._stopping = True
        self._wake.set()
        task, self._task = self._task, None
        await finish_or_cancel([task])
        with contextlib.suppress(Exception):  # a store already gone: the leases simply expire
            await self._release_mine()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def wake(self) -> None:
        """Look for due rows now (a task just ended in this process)."""
        self._wake.set()

    async def _run(self) -> None:
        while not self._stopping:
            self._wake.clear()
            try:
                await self.deliver_due()
            except Exception:  # a store outage must not end the loop; the next round retries
                logger.exception("ARAP callback delivery round failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._poll_s)  # the poll period, or a wake-up

    # -- delivery ---------------------------------------------------------------------------------

    async def deliver_due(self) -> int:
        """One round: claim the due rows no other worker holds, and attempt each; returns how many were delivered."""
        claimed = await self._claim()
        # At once, so every attempt ends (timeout_s) well inside the lease taken for the batch.
        return sum(await asyncio.gather(*(self._attempt(row) for row in claimed)))

    async def _claim(self) -> list[dict[str, Any]]:
        now = self._clock.now_ms()
        free = or_(_C.c.lease_owner.is_(None), _C.c.lease_expires_at < now)
        due = select(_C.c.task_id).where(_C.c.next_attempt_at <= now, free).order_by(_C.c.next_attempt_at)
        if not await self._database.read(lambda conn: conn.execute(due.limit(1)).first() is not None):
            return []  # an idle round costs a read, never a write transaction

        def take(conn: Connection) -> list[dict[str, Any]]:
            taken = []
            for task_id in conn.execute(due.limit(_BATCH)).scalars().all():
                # Compare-and-set: only a row still due and free becomes ours.
                claim = (
                    update(_C)
                    .where(_C.c.task_id == task_id, _C.c.next_attempt_at <= now, free)
                    .values(lease_owner=self.owner, lease_expires_at=now + self._lease_ms)
                )
                if conn.execute(claim).rowcount == 1:
                    taken.append(dict(conn.execute(select(_C).where(_C.c.task_id == task_id)).mappings().one()))
            return taken

        return await self._database.write(take)

    async def _attempt(self, row: dict[str, Any]) -> int:
        body: dict[str, Any] = {
            "task": {
                "id": row["task_id"],
                "status": row["status"],
                "status_endpoint": f"{self._endpoint}/{row['task_id']}",
            }
        }
        if row["state"] is not None:
            body = {"state": row["state"], **body}
        raw = json.dumps(body, separators=(",", ":")).encode()
        signature = sign_callback(self._secret, raw, self._clock.now_ms() // 1000)
        headers = {"Content-Type": "application/json", SIGNATURE_HEADER: signature}
        try:
            response = await self._http().post(row["endpoint"], content=raw, headers=headers)
        except httpx2.HTTPError as exc:
            await self._failed(row, f"{type(exc).__name__}: {exc}")
            return 0
        if response.is_success or response.status_code == 409:  # 409: this signature was already accepted
            await self._settle(row, delivered_at=self._clock.now_ms())
            return 1
        await self._failed(row, f"answered {response.status_code}")
        return 0

    async def _failed(self, row: dict[str, Any], error: str) -> None:
        now = self._clock.now_ms()
        attempts = row["attempts"] + 1
        target = origin(row["endpoint"])
        if attempts >= self._max_attempts or now - row["created_at"] >= self._max_age_ms:
            logger.warning("gave up on the callback of task %s… to %s after %d attempts: %s",
                           row["task_id"][:12], target, attempts, error)  # fmt: skip
            await self._settle(row, abandoned_at=now, error=error)
            return
        delay = min(self._max_backoff_ms, self._backoff_ms * 2 ** (attempts - 1))
        logger.warning(
            "callback of task %s… to %s failed (attempt %d): %s", row["task_id"][:12], target, attempts, error
        )
        mine = (_C.c.task_id == row["task_id"]) & (_C.c.lease_owner == self.owner)
        retry = update(_C).where(mine).values(
            attempts=attempts, next_attempt_at=now + delay, last_error=error[:1000], lease_owner=None,
            lease_expires_at=None,
        )  # fmt: skip
        await self._database.write(lambda conn: conn.execute(retry))

    async def _settle(
        self,
        row: dict[str, Any],
        *,
        delivered_at: int | None = None,
        abandoned_at: int | None = None,
        error: str | None = None,
    ) -> None:
        """Mark the row delivered or abandoned (it is never attempted again)."""
        values: dict[str, Any] = {
            "attempts": row["attempts"] + 1,
            "next_attempt_at": None,
            "delivered_at": delivered_at,
            "abandoned_at": abandoned_at,
            "lease_owner": None,
            "lease_expires_at": None,
        }
        if error is not None:
            values["last_error"] = error[:1000]
        # Fenced by the lease: a worker whose claim expired (and was taken over) changes nothing.
        settle = update(_C).where(_C.c.task_id == row["task_id"], _C.c.lease_owner == self.owner).values(**values)
        await self._database.write(lambda conn: conn.execute(settle))

    async def purge(self, before_ms: int) -> int:
        """Drop rows delivered or abandoned before ``before_ms``; returns how many."""
        settled = or_(_C.c.delivered_at < before_ms, _C.c.abandoned_at < before_ms)
        statement = delete(_C).where(_C.c.next_attempt_at.is_(None), settled)
        return await self._database.write(lambda conn: int(conn.execute(statement).rowcount))

    async def _release_mine(self) -> None:
        release = update(_C).where(_C.c.lease_owner == self.owner).values(lease_owner=None, lease_expires_at=None)
        await self._database.write(lambda conn: conn.execute(release))

    def _http(self) -> httpx2.AsyncClient:
        if self._client is None:  # made in the running loop, on first use
            self._client = httpx2.AsyncClient(timeout=self._timeout_s, follow_redirects=False)
        return self._client
