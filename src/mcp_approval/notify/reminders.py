"""Nobody forgotten: a pending request's reviewers reminded, then the request escalated to another role.

A template sets ``remind_after_s`` (its reviewers are told again, on its ``notify`` channels) and
``escalate_after_s`` with ``escalate_to`` (that role is told, on ``escalate_notify``). Each step
happens once per request, whatever the number of workers and restarts:

1. **Claim.** Every worker's outbox round looks for pending requests whose step is due
   (:meth:`Reminders.claim_due`). A step is claimed by inserting its row into ``reminder_steps``
   (primary key: request and step) in the same transaction as its audit event
   (``approval.reminded`` / ``approval.escalated``, which names the role and the channels). A
   second worker's insert fails on the key and its transaction, event included, rolls back.
2. **Send.** The event joins the audit chain, which is the outbox: each named channel's cursor
   delivers it like any other event (at least once, in order, retried until accepted), as a
   notification of type ``approval.reminder`` or ``approval.escalated``.
3. **Record.** Once a channel accepted it, ``reminder_deliveries`` gets its row (key: request,
   step, channel) with an ``approval.told`` audit event in one transaction, so a send repeated
   after a crash is recorded once. Request pages read these events
   (:mod:`mcp_approval.backends.told`): who was told, when, on which channel.

When a step is due comes from the template as configured now; whether the escalation role may
decide comes from the request's sealed rules (:class:`~mcp_approval.backends.RequestRules`), set
when the request opened. A request that is no longer pending (decided, expired, cancelled) is
never reminded. The tables are the ``reminders`` history (:data:`REMINDER_MIGRATIONS`), migrated
by a deployment with a template that reminds or escalates.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import BigInteger, Column, Connection, MetaData, String, Table, Text, exists, select
from sqlalchemy.exc import IntegrityError

from mcp_approval.backends import ApprovalTemplate
from mcp_approval.backends.local.schema import approval_requests_table
from mcp_approval.backends.told import STEP_EVENTS, TOLD_EVENT, Step
from mcp_approval.clock import Clock, SystemClock
from mcp_approval.storage import AuditLog, Database, Migrations

__all__ = [
    "ACTOR",
    "REMINDER_MIGRATIONS",
    "Reminders",
    "StepPlan",
    "metadata",
    "reminder_deliveries_table",
    "reminder_steps_table",
]

_log = logging.getLogger(__name__)

#: The reminders' and escalations' history (no release before it had these tables).
REMINDER_MIGRATIONS = Migrations("reminders", Path(__file__).with_name("reminder_schema_versions"))
#: The actor of the audit events of this module.
ACTOR = "notifications"
#: Requests claimed per step and template in one round (the next round takes the rest).
_BATCH = 100

metadata = MetaData()

reminder_steps_table = Table(
    "reminder_steps",
    metadata,
    Column("request_id", String(64), primary_key=True),
    # "remind" or "escalate": one row each, at most, per request.
    Column("step", String(16), primary_key=True),
    # Who it tells, and the channels that tell them (JSON list).
    Column("role", String(256), nullable=False),
    Column("channels_json", Text, nullable=False),
    Column("due_at", BigInteger, nullable=False),
    Column("claimed_at", BigInteger, nullable=False),
)

reminder_deliveries_table = Table(
    "reminder_deliveries",
    metadata,
    Column("request_id", String(64), primary_key=True),
    Column("step", String(16), primary_key=True),
    # The [notifications.channels] name that accepted it.
    Column("channel", String(100), primary_key=True),
    Column("sent_at", BigInteger, nullable=False),
)

_R = approval_requests_table
_S = reminder_steps_table
_D = reminder_deliveries_table


@dataclass(frozen=True)
class StepPlan:
    """One template's step: when it is due, whom it tells, on which channels."""

    template: str
    step: Step
    after_ms: int
    role: str
    channels: tuple[str, ...]

    @classmethod
    def of(cls, name: str, template: ApprovalTemplate) -> list[StepPlan]:
        """The steps ``template`` (named ``name``) sets (none, one or two)."""
        plans = []
        if template.remind_after_s is not None:
            after = round(template.remind_after_s * 1000)
            plans.append(cls(name, "remind", after, template.reviewer_role, tuple(template.notify)))
        if template.escalate_after_s is not None and template.escalate_to is not None:
            after = round(template.escalate_after_s * 1000)
            plans.append(cls(name, "escalate", after, template.escalate_to, tuple(template.escalation_channels())))
        return plans


class Reminders:
    """Claims the reminders and escalations that are due, and records each channel's delivery.

    Args:
        database: the deployment's store (the local backend's requests are in it).
        audit: where each step and each delivery is recorded.
        templates: the configured templates, by name.
        clock: the source of time.
    """

    def __init__(
        self, database: Database, audit: AuditLog, templates: Mapping[str, ApprovalTemplate], clock: Clock | None = None
    ) -> None:
        self._db = database
        self._audit = audit
        self._clock = clock or SystemClock()
        self._plans = [plan for name, template in templates.items() for plan in StepPlan.of(name, template)]

    @property
    def plans(self) -> tuple[StepPlan, ...]:
        """Every template's steps."""
        return tuple(self._plans)

    async def claim_due(self) -> int:
        """Claim every step that is due now (an audit event each); how many this worker claimed."""
        claimed = 0
        for plan in self._plans:
            due = await self._db.read(functools.partial(_due, plan=plan, now=self._clock.now_ms()))
            for request_id, created_at in due:
                if await self._claim(plan, request_id, created_at + plan.after_ms):
                    claimed += 1
        return claimed

    async def _claim(self, plan: StepPlan, request_id: str, due_at: int) -> bool:
        now = self._clock.now_ms()

        def write(conn: Connection) -> bool:
            status = conn.execute(select(_R.c.status, _R.c.expires_at).where(_R.c.request_id == request_id)).first()
            if (
                status is None
                or status.status != "pending"
                or (status.expires_at is not None and status.expires_at <= now)
            ):
                return False  # decided or lapsed since it was found: nobody is told of it again
            conn.execute(
                _S.insert(),
                {
                    "request_id": request_id,
                    "step": plan.step,
                    "role": plan.role,
                    "channels_json": json.dumps(list(plan.channels)),
                    "due_at": due_at,
                    "claimed_at": now,
                },
            )
            data = {"step": plan.step, "role": plan.role, "channels": list(plan.channels), "template": plan.template}
            self._audit.record_in(conn, now, STEP_EVENTS[plan.step], subject=request_id, actor=ACTOR, data=data)
            return True

        try:
            return await self._db.write(write)
        except IntegrityError:  # another worker claimed it first: it is that worker's step
            return False

    async def delivered(self, request_id: str, step: str, role: str, channel: str) -> None:
        """Record that ``channel`` accepted the ``step`` notification of ``request_id`` (once, however often sent)."""
        now = self._clock.now_ms()

        def write(conn: Connection) -> None:
            row = {"request_id": request_id, "step": step, "channel": channel, "sent_at": now}
            conn.execute(_D.insert(), row)
            data = {"step": step, "role": role, "channel": channel}
            self._audit.record_in(conn, now, TOLD_EVENT, subject=request_id, actor=ACTOR, data=data)

        try:
            await self._db.write(write)
        except IntegrityError:  # sent again after a crash or a lost lease: recorded the first time
            _log.debug("the %s of %s… on %r was already recorded", step, request_id[:8], channel)


def _due(conn: Connection, *, plan: StepPlan, now: int) -> list[tuple[str, int]]:
    """The pending requests of ``plan``'s template whose step is due and not yet claimed."""
    claimed = exists().where(_S.c.request_id == _R.c.request_id, _S.c.step == plan.step)
    query = (
        select(_R.c.request_id, _R.c.created_at)
        .where(
            _R.c.status == "pending",
            _R.c.template == plan.template,
            _R.c.created_at <= now - plan.after_ms,
            (_R.c.expires_at.is_(None)) | (_R.c.expires_at > now),
            ~claimed,
        )
        .order_by(_R.c.created_at)
        .limit(_BATCH)
    )
    return [(str(row.request_id), int(row.created_at)) for row in conn.execute(query)]
