"""Nobody forgotten: reminders and escalations of pending requests, on a clock moved by hand.

A template reminds its reviewers after ``remind_after_s`` and escalates to another role after
``escalate_after_s``; each step is claimed once in the store (two outboxes on one database, as two
workers, claim it once), sent to a real Standard Webhooks receiver on 127.0.0.1, recorded as audit
events, and shown on the request (who was told, when, on which channel). Whether the escalation
role may decide is sealed into the request's rules when it opens. SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import text

from mcp_approval.backends import ApprovalTemplate, LocalApprovalBackend, NotEligibleError
from mcp_approval.backends.contract import ApprovalSubmission
from mcp_approval.backends.local.schema import LOCAL_BACKEND_MIGRATIONS
from mcp_approval.clock import ManualClock, SystemClock
from mcp_approval.keyring import binding_cipher
from mcp_approval.notify import (
    CONSUMER_PREFIX,
    NotificationOptions,
    NotificationOutbox,
    WebhookChannelOptions,
    notification_outbox,
)
from mcp_approval.notify.reminders import Reminders
from mcp_approval.storage import (
    AUDIT_MIGRATIONS,
    SHARED_MIGRATIONS,
    AuditLog,
    Database,
    DeliveryCursors,
    migrate,
    open_database,
)
from tests.support.polling import eventually
from tests.support.receivers import WEBHOOK_SECRET, WebhookReceiver
from tests.support.timing import scaled

pytestmark = pytest.mark.anyio

ROLES = {"carol": frozenset({"approver"}), "erin": frozenset({"admin"}), "alice": frozenset({"treasurer"})}
REMIND_S, ESCALATE_S = 60.0, 120.0


def template(**fields: Any) -> ApprovalTemplate:
    base: dict[str, Any] = {
        "notify": ["team"],
        "remind_after_s": REMIND_S,
        "escalate_after_s": ESCALATE_S,
        "escalate_to": "admin",
        "escalate_notify": ["leads"],
    }
    return ApprovalTemplate(**(base | fields))


def submission(template_name: str = "payments", amount: int = 1000) -> ApprovalSubmission:
    return ApprovalSubmission(
        tool="wire_transfer", arguments={"to": "acct-1", "amount": amount}, requester="alice", template=template_name
    )


@dataclass
class Rig:
    """A sealed local backend, its audit log and two outboxes (two workers) on one store, the clock by hand."""

    database: Database
    backend: LocalApprovalBackend
    audit: AuditLog
    clock: ManualClock
    outboxes: tuple[NotificationOutbox, NotificationOutbox]
    team: WebhookReceiver
    leads: WebhookReceiver

    async def submit(self, template_name: str = "payments", amount: int = 1000) -> str:
        return await self.backend.submit(secrets.token_urlsafe(32), submission(template_name, amount))

    async def round(self) -> None:
        """One delivery round of each worker."""
        for outbox in self.outboxes:
            await outbox.deliver_due()

    def types(self, receiver: WebhookReceiver, request_id: str) -> list[str]:
        return [d.payload["type"] for d in receiver.accepted() if d.payload["data"]["request_id"] == request_id]

    async def events(self, request_id: str, kind: str) -> list[Any]:
        return [event for event in await self.audit.events(subject=request_id) if event.kind == kind]


@pytest.fixture
def receivers() -> Iterator[tuple[WebhookReceiver, WebhookReceiver]]:
    team, leads = WebhookReceiver().start(), WebhookReceiver().start()
    yield team, leads
    team.stop()
    leads.stop()


@contextlib.asynccontextmanager
async def make_rig(
    db_url: str, receivers: tuple[WebhookReceiver, WebhookReceiver], templates: dict[str, ApprovalTemplate]
) -> AsyncIterator[Rig]:
    team, leads = receivers
    database = open_database(db_url)
    # The receiver checks each signature's timestamp against its own clock: start at the real time.
    clock = ManualClock(SystemClock().now_ms())
    seal = binding_cipher({"k1": base64.b64encode(secrets.token_bytes(32)).decode()})
    audit = AuditLog(database, clock)
    backend = LocalApprovalBackend(
        database, templates=templates, roles=lambda who: ROLES.get(who, frozenset()), audit=audit, clock=clock
    ).sealed_with(seal)
    channels = {
        "team": WebhookChannelOptions(url=team.url, secret=WEBHOOK_SECRET),
        "leads": WebhookChannelOptions(url=leads.url, secret=WEBHOOK_SECRET),
    }
    # A failed attempt is retried after a wait on this clock: 10 ms, which each probe of ``delivered`` moves it.
    options = NotificationOptions(
        channels=channels,
        poll_interval_s=3600,
        retry_initial_s=0.01,
        retry_max_s=0.01,
        lease_s=scaled(20),
        timeout_s=scaled(10),
        console_url="http://x.test",
    )
    first = notification_outbox(options, backend, database, audit, clock=clock)
    second = notification_outbox(options, backend, database, audit, clock=clock)
    assert first is not None
    assert second is not None
    await migrate(database, AUDIT_MIGRATIONS, SHARED_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS, *first.migrations)
    # The cursors start() would create, without its background loop: only the test's rounds deliver.
    cursors = DeliveryCursors(database, owner="rig", lease_ms=1000, clock=clock)
    for name in channels:
        await cursors.ensure(CONSUMER_PREFIX + name)
    try:
        yield Rig(database, backend, audit, clock, (first, second), team, leads)
    finally:
        await first.stop()
        await second.stop()
        await database.close()


@pytest.fixture
async def rig(db_url: str, receivers: tuple[WebhookReceiver, WebhookReceiver]) -> AsyncIterator[Rig]:
    templates = {"payments": template(), "quiet": ApprovalTemplate(notify=["team"])}
    async with make_rig(db_url, receivers, templates) as made:
        yield made


async def delivered(rig: Rig, receiver: WebhookReceiver, request_id: str, wanted: list[str]) -> None:
    """Run delivery rounds until ``receiver`` got exactly ``wanted`` about the request."""

    async def round_then_types() -> list[str]:
        rig.clock.advance(10)  # past the wait before a failed attempt's retry (a loaded receiver may time out)
        await rig.round()
        return rig.types(receiver, request_id)

    await eventually(round_then_types, lambda found: found == wanted)


async def test_reviewers_are_reminded_once_after_remind_after_s_then_the_escalation_role_is_told(rig: Rig) -> None:
    request_id = await rig.submit()
    await delivered(rig, rig.team, request_id, ["approval.requested"])

    created_at = (await rig.backend.get_request(request_id)).created_at  # type: ignore[union-attr]
    rig.clock.advance(created_at + int(REMIND_S * 1000) - 1 - rig.clock.now_ms())
    await rig.round()
    assert await rig.events(request_id, "approval.reminded") == [], "not a millisecond early"

    rig.clock.advance(1)
    await delivered(rig, rig.team, request_id, ["approval.requested", "approval.reminder"])
    for _ in range(3):  # more rounds of both workers: the reminder is not sent again
        await rig.round()
    assert rig.types(rig.team, request_id) == ["approval.requested", "approval.reminder"]
    assert rig.types(rig.leads, request_id) == [], "a reminder goes to the reviewers' channels only"
    (reminded,) = await rig.events(request_id, "approval.reminded")
    assert reminded.data == {"step": "remind", "role": "approver", "channels": ["team"], "template": "payments"}

    rig.clock.advance(created_at + int(ESCALATE_S * 1000) - rig.clock.now_ms())
    await delivered(rig, rig.leads, request_id, ["approval.escalated"])
    await rig.round()
    assert rig.types(rig.team, request_id) == ["approval.requested", "approval.reminder"]
    (escalation,) = [d.payload for d in rig.leads.accepted()]
    assert escalation["data"]["told"] == "admin"
    assert escalation["data"]["tool"] == "wire_transfer"
    assert all(d.verified for d in rig.team.all() + rig.leads.all())

    record = await rig.backend.get_request(request_id)
    assert record is not None
    told = [(t.step, t.role, t.channel) for t in record.told]
    assert told == [("remind", "approver", "team"), ("escalate", "admin", "leads")]
    assert record.to_json()["told"][0]["at"] == record.told[0].to_json()["at"]
    reminded_at, escalated_at = (told.at for told in record.told)
    assert record.created_at + REMIND_S * 1000 <= reminded_at < record.created_at + ESCALATE_S * 1000
    assert escalated_at >= record.created_at + ESCALATE_S * 1000
    # The requester sees no one's name and nothing of who was told.
    mine = await rig.backend.get_request(request_id, viewer="alice")
    assert mine is not None
    assert mine.told == ()
    assert (await rig.audit.verify()).ok


async def test_a_request_decided_before_its_reminder_is_never_reminded(rig: Rig) -> None:
    decided = await rig.submit()
    waiting = await rig.submit(amount=2000)
    await rig.backend.decide(decided, "carol", "approve", None)
    rig.clock.advance(int(ESCALATE_S * 1000))
    await delivered(rig, rig.leads, waiting, ["approval.escalated"])
    await rig.round()
    assert await rig.events(decided, "approval.reminded") == []
    assert await rig.events(decided, "approval.escalated") == []
    assert rig.types(rig.leads, decided) == []
    assert (await rig.audit.verify()).ok


async def test_a_template_without_reminders_stays_quiet(rig: Rig) -> None:
    request_id = await rig.submit("quiet")
    await delivered(rig, rig.team, request_id, ["approval.requested"])
    rig.clock.advance(int(ESCALATE_S * 1000) * 2)
    await rig.round()
    await rig.round()
    assert await rig.events(request_id, "approval.reminded") == []
    assert rig.types(rig.team, request_id) == ["approval.requested"]


async def test_two_workers_claiming_at_once_claim_each_step_once(rig: Rig) -> None:
    ids = [await rig.submit(amount=100 + n) for n in range(5)]
    rig.clock.advance(int(ESCALATE_S * 1000))
    workers = [Reminders(rig.database, rig.audit, rig.backend.templates, rig.clock) for _ in range(4)]
    claimed = await asyncio.gather(*(worker.claim_due() for worker in workers))
    assert sum(claimed) == 10, "five requests, two steps each, claimed once across the workers"
    rows = await rig.database.read(
        lambda conn: conn.execute(text("SELECT step, count(*) FROM reminder_steps GROUP BY step")).all()
    )
    assert sorted(tuple(row) for row in rows) == [("escalate", 5), ("remind", 5)]
    for request_id in ids:
        assert len(await rig.events(request_id, "approval.reminded")) == 1
        assert len(await rig.events(request_id, "approval.escalated")) == 1
    assert (await rig.audit.verify()).ok


async def test_a_delivery_sent_again_is_recorded_once(rig: Rig) -> None:
    request_id = await rig.submit()
    reminders = Reminders(rig.database, rig.audit, rig.backend.templates, rig.clock)
    await reminders.delivered(request_id, "remind", "approver", "team")
    rig.clock.advance(5)
    await reminders.delivered(request_id, "remind", "approver", "team")  # after a crash between send and cursor
    assert len(await rig.events(request_id, "approval.told")) == 1
    record = await rig.backend.get_request(request_id)
    assert record is not None
    assert len(record.told) == 1


async def test_the_escalation_role_decides_only_once_escalated_when_the_template_says_so(
    db_url: str, receivers: tuple[WebhookReceiver, WebhookReceiver]
) -> None:
    templates = {
        "payments": template(escalation_may_decide=True),
        "tell-only": template(),
    }
    async with make_rig(db_url, receivers, templates) as rig:
        may = await rig.submit("payments")
        told_only = await rig.submit("tell-only")
        with pytest.raises(NotEligibleError, match="decides only once the request escalated"):
            await rig.backend.decide(may, "erin", "approve", None)
        hidden = await rig.backend.page_requests("pending", viewer="erin", offset=0, limit=10)
        assert hidden.records == [], "not before it escalated"

        rig.clock.advance(int(ESCALATE_S * 1000))
        await delivered(rig, rig.leads, may, ["approval.escalated"])
        listed = await rig.backend.page_requests("pending", viewer="erin", offset=0, limit=10)
        assert [r.id for r in listed.records] == [may], "the escalation role sees what it may decide"
        with pytest.raises(NotEligibleError, match="lacks the role 'approver'"):
            await rig.backend.decide(told_only, "erin", "approve", None)
        record = await rig.backend.decide(may, "erin", "approve", "nobody else answered")
        assert record.status.value == "approved"
        assert (await rig.backend.status(may)).status.value == "approved", "its sealed rules approve it"
        assert (await rig.audit.verify()).ok


async def test_the_escalation_is_sealed_when_the_request_opens(
    db_url: str, receivers: tuple[WebhookReceiver, WebhookReceiver]
) -> None:
    """Editing the stored rules to let the escalation role decide at once fails the request's seal."""
    async with make_rig(db_url, receivers, {"payments": template(escalation_may_decide=True)}) as rig:
        request_id = await rig.submit()
        (stored,) = await rig.database.read(
            lambda conn: conn.execute(
                text("SELECT rules_json FROM approval_requests WHERE request_id = :id"), {"id": request_id}
            ).all()
        )
        assert '"escalation_after_ms":120000' in stored[0]
        assert '"escalation_role":"admin"' in stored[0]
        edited = stored[0].replace('"escalation_after_ms":120000', '"escalation_after_ms":1')

        async def tamper() -> None:
            statement = text("UPDATE approval_requests SET rules_json = :rules WHERE request_id = :id")
            await rig.database.write(lambda conn: conn.execute(statement, {"rules": edited, "id": request_id}))

        await tamper()
        rig.clock.advance(10)
        with pytest.raises(Exception, match="does not match what was submitted"):
            await rig.backend.decide(request_id, "erin", "approve", None)
        assert (await rig.backend.status(request_id)).status.value != "approved"


async def test_requests_without_an_escalation_keep_their_rules_text() -> None:
    """The rules of a request with no escalation are the same text as before escalations existed."""
    from mcp_approval.backends import RequestRules

    plain = RequestRules.of(ApprovalTemplate())
    assert "escalation" not in plain.to_text()
    assert RequestRules.from_text(plain.to_text()) == plain
    sealed = RequestRules.of(template(escalation_may_decide=True))
    assert RequestRules.from_text(sealed.to_text()) == sealed
    assert RequestRules.of(template()).escalation_role is None, "told only: the role decides nothing"
