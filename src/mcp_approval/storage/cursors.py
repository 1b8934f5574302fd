"""Delivery cursors over the audit chain: the audit log read as a durable outbox.

Every state change commits its audit event in the same transaction, so the chain already holds,
in commit order, everything a consumer (a notification channel) must be told. A consumer's
cursor (a row of ``audit_delivery_cursors``) records the last chain position it delivered; a
worker delivers the events after it, one at a time, and advances the cursor after each
delivery. A worker that dies between a delivery and the advance leaves the cursor behind, so the
event is delivered again: delivery is at least once.

Any worker may deliver for any consumer. :meth:`DeliveryCursors.claim` takes the consumer's lease
(a compare-and-set on ``lease_owner``/``lease_expires_at``) when the consumer is due; each
advance is fenced by the lease, so a worker that lost it cannot move the cursor. A failed
delivery counts an attempt and sets when the next one is due (the caller's backoff); the cursor
stays where it is, so later events wait behind the failed one and arrive in order.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from sqlalchemy import BigInteger, Column, Connection, Integer, String, Table, Text, or_, select, update
from sqlalchemy.exc import IntegrityError

from mcp_approval.clock import Clock, SystemClock
from mcp_approval.storage.audit import AuditLog, audit_chain_head_table, audit_events_table
from mcp_approval.storage.database import Database

__all__ = ["DeliveryCursor", "DeliveryCursors", "all_cursors", "audit_delivery_cursors_table"]

#: Per consumer: the last chain position delivered, the retry schedule and the delivering worker's lease.
audit_delivery_cursors_table = Table(
    "audit_delivery_cursors",
    audit_events_table.metadata,
    Column("consumer", String(128), primary_key=True),
    Column("last_seq", BigInteger, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("next_attempt_at", BigInteger, nullable=False),
    Column("lease_owner", String(64), nullable=True),
    Column("lease_expires_at", BigInteger, nullable=True),
    Column("delivered", BigInteger, nullable=False),
    Column("failures", BigInteger, nullable=False),
    Column("last_error", Text, nullable=True),
    Column("updated_at", BigInteger, nullable=False),
)

_C = audit_delivery_cursors_table
_H = audit_chain_head_table


@dataclass(frozen=True)
class DeliveryCursor:
    """One consumer's position and counts.

    Attributes:
        consumer: its name (a notification channel).
        last_seq: the last chain position delivered (or skipped as not for it).
        attempts: failed attempts at the event after ``last_seq`` (0 after a success).
        next_attempt_at: when the next attempt is due (epoch ms).
        delivered: events delivered so far (all workers together).
        failures: failed attempts so far (all workers together).
        last_error: why the latest attempt failed, if it did.
    """

    consumer: str
    last_seq: int
    attempts: int
    next_attempt_at: int
    delivered: int
    failures: int
    last_error: str | None


class DeliveryCursors:
    """Cursors and leases of the consumers of one audit chain.

    Args:
        database: a database migrated with :data:`~mcp_approval.storage.audit.AUDIT_MIGRATIONS`.
        owner: this worker's lease owner id (unique per process).
        lease_ms: how long a claim holds without renewal (each advance renews it).
        clock: the source of time.
    """

    def __init__(self, database: Database, *, owner: str, lease_ms: int, clock: Clock | None = None) -> None:
        self._database = database
        self.owner = owner
        self._lease_ms = lease_ms
        self._clock = clock or SystemClock()
        self._audit = AuditLog(database, self._clock)

    async def ensure(self, consumer: str) -> None:
        """Create ``consumer``'s cursor at the chain's current head, unless it exists.

        A new consumer is told what happens from now on, not the history before it (the events
        committed before the call are linked first, so they are before the head).
        """
        now = self._clock.now_ms()
        await self._audit.link()

        def create(conn: Connection) -> None:
            if conn.execute(select(_C.c.consumer).where(_C.c.consumer == consumer)).first() is not None:
                return
            head = conn.execute(select(_H.c.seq).where(_H.c.id == 1)).scalar_one_or_none() or 0
            values = {"consumer": consumer, "last_seq": head, "attempts": 0, "next_attempt_at": now}
            conn.execute(_C.insert(), {**values, "delivered": 0, "failures": 0, "updated_at": now})

        with contextlib.suppress(IntegrityError):  # another worker created it first
            await self._database.write(create)

    async def claim(self, consumer: str) -> int | None:
        """Take ``consumer``'s lease if it is due and free (or expired, or already ours) and the
        chain holds events after its cursor.

        Returns the last delivered position, or ``None`` when there is nothing to deliver, another
        worker holds the lease or the next attempt is not due yet. An idle consumer costs a read,
        never a write transaction.
        """
        now = self._clock.now_ms()
        await self._audit.link()  # the events after the cursor count once they are linked
        if not await self._database.read(lambda conn: _worth_claiming(conn, consumer, now)):
            return None
        free = or_(_C.c.lease_owner.is_(None), _C.c.lease_expires_at < now, _C.c.lease_owner == self.owner)
        claim = (
            update(_C)
            .where(_C.c.consumer == consumer, _C.c.next_attempt_at <= now, free)
            .values(lease_owner=self.owner, lease_expires_at=now + self._lease_ms)
        )

        def take(conn: Connection) -> int | None:
            if conn.execute(claim).rowcount != 1:
                return None
            return int(conn.execute(select(_C.c.last_seq).where(_C.c.consumer == consumer)).scalar_one())

        return await self._database.write(take)

    async def advance(self, consumer: str, seq: int, *, delivered: int) -> bool:
        """Move the cursor to ``seq`` (``delivered`` events were delivered up to it) and renew the lease.

        Returns ``False`` when this worker no longer holds the lease (nothing is changed).
        """
        now = self._clock.now_ms()
        move = (
            update(_C)
            .where(_C.c.consumer == consumer, _C.c.lease_owner == self.owner, _C.c.last_seq < seq)
            .values(
                last_seq=seq,
                attempts=0,
                last_error=None,
                delivered=_C.c.delivered + delivered,
                lease_expires_at=now + self._lease_ms,
                updated_at=now,
            )
        )
        return await self._database.write(lambda conn: conn.execute(move).rowcount == 1)

    async def failed(self, consumer: str, error: str, *, retry_in_ms: int) -> None:
        """Count a failed attempt, schedule the next one ``retry_in_ms`` from now, and release the lease."""
        now = self._clock.now_ms()
        fail = (
            update(_C)
            .where(_C.c.consumer == consumer, _C.c.lease_owner == self.owner)
            .values(
                attempts=_C.c.attempts + 1,
                failures=_C.c.failures + 1,
                next_attempt_at=now + retry_in_ms,
                last_error=error[:1000],
                lease_owner=None,
                lease_expires_at=None,
                updated_at=now,
            )
        )
        await self._database.write(lambda conn: conn.execute(fail))

    async def release(self, consumer: str) -> None:
        """Give the lease up (if this worker holds it)."""
        release = (
            update(_C)
            .where(_C.c.consumer == consumer, _C.c.lease_owner == self.owner)
            .values(lease_owner=None, lease_expires_at=None)
        )
        await self._database.write(lambda conn: conn.execute(release))

    async def get(self, consumer: str) -> DeliveryCursor | None:
        """``consumer``'s cursor, or ``None``."""
        rows = await self._database.read(_all_cursors)
        return next((cursor for cursor in rows if cursor.consumer == consumer), None)


def _worth_claiming(conn: Connection, consumer: str, now: int) -> bool:
    """Whether ``consumer`` is due and the chain's head is past its cursor."""
    row = conn.execute(select(_C.c.last_seq, _C.c.next_attempt_at).where(_C.c.consumer == consumer)).first()
    head = conn.execute(select(_H.c.seq).where(_H.c.id == 1)).scalar_one_or_none() or 0
    return row is not None and row.next_attempt_at <= now and head > row.last_seq


async def all_cursors(database: Database) -> list[DeliveryCursor]:
    """Every consumer's cursor, by name."""
    return await database.read(_all_cursors)


def _all_cursors(conn: Connection) -> list[DeliveryCursor]:
    rows = conn.execute(select(_C).order_by(_C.c.consumer)).mappings()
    return [
        DeliveryCursor(
            consumer=row["consumer"],
            last_seq=int(row["last_seq"]),
            attempts=int(row["attempts"]),
            next_attempt_at=int(row["next_attempt_at"]),
            delivered=int(row["delivered"]),
            failures=int(row["failures"]),
            last_error=row["last_error"],
        )
        for row in rows
    ]
