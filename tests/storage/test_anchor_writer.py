"""The anchor writer (``[audit.anchor]``) never anchors a chain that no longer holds its previous anchor.

Between two anchors the database is written the way someone with write access to it would (the
tail deleted and the head moved back, the chain wiped, the tail rewritten with its hashes
recomputed): the next write refuses, leaves the file as it was, logs an ERROR, counts an alert,
and tells the webhook. A writer started afresh reads its previous anchor back from the file.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from sqlalchemy import text

from mcp_approval.notify.anchors import AuditAnchors
from mcp_approval.notify.options import AnchorOptions, AppriseChannelOptions, WebhookChannelOptions
from mcp_approval.storage import AUDIT_MIGRATIONS, AuditLog, Database, migrate, open_database
from tests.support.audit import rewrite_from
from tests.support.receivers import WEBHOOK_SECRET, SmtpReceiver, WebhookReceiver

pytestmark = pytest.mark.anyio

ALERT = "mcp_approval.notify.anchors"


@asynccontextmanager
async def audit_log(url: str) -> AsyncIterator[AuditLog]:
    database = open_database(url)
    try:
        await migrate(database, AUDIT_MIGRATIONS)
        yield AuditLog(database)
    finally:
        await database.close()


@asynccontextmanager
async def webhook() -> AsyncIterator[WebhookReceiver]:
    receiver = WebhookReceiver().start()
    try:
        yield receiver
    finally:
        receiver.stop()


def writer(log: AuditLog, file: Path, receiver: WebhookReceiver | None = None) -> AuditAnchors:
    hook = WebhookChannelOptions(url=receiver.url, secret=WEBHOOK_SECRET) if receiver is not None else None
    return AuditAnchors(AnchorOptions(interval_s=60, file=file, webhook=hook), log)


async def record(log: AuditLog, count: int, subject: str = "req") -> None:
    for number in range(count):
        await log.record("approval.submitted", subject=f"{subject}-{number}", actor="alice", data={"n": number})


async def sql(log: AuditLog, *statements: str) -> None:
    await _database(log).write(lambda conn: [conn.execute(text(statement)) for statement in statements])


def _database(log: AuditLog) -> Database:
    return log._database  # the test plays a writer with the database's credentials


async def delete_tail(log: AuditLog) -> None:
    """The finding of issue 36: the last three events deleted and the head moved back onto the fourth-last."""
    seq, _ = await log.head()
    await sql(
        log,
        f"DELETE FROM audit_events WHERE seq > {seq - 3}",
        f"UPDATE audit_chain_head SET seq = {seq - 3}, hash = (SELECT hash FROM audit_events WHERE seq = {seq - 3})",
    )


async def wipe(log: AuditLog) -> None:
    await sql(log, "DELETE FROM audit_events", "DELETE FROM audit_chain_head")


async def rewrite(log: AuditLog) -> None:
    """The event at position 2 edited and every hash after it recomputed, the head's too: the chain alone holds."""
    await _database(log).write(lambda conn: rewrite_from(conn, 2))
    assert (await log.verify()).ok  # nothing but an anchor can tell


TAMPERINGS: dict[str, Callable[[AuditLog], object]] = {"tail": delete_tail, "wipe": wipe, "rewrite": rewrite}


async def anchored_twice(anchors: AuditAnchors, log: AuditLog, first: int, then: int) -> AuditAnchors:
    """``first`` events recorded and anchored, then ``then`` more and anchored again."""
    await record(log, first)
    assert await anchors.write() is not None
    await record(log, then, "more")
    assert await anchors.write() is not None
    return anchors


def lines(file: Path) -> list[str]:
    return file.read_text().splitlines() if file.exists() else []


def alerts(receiver: WebhookReceiver) -> list[dict[str, object]]:
    return [d.payload for d in receiver.all() if d.payload.get("kind") == "audit.anchor.alert"]


@pytest.mark.parametrize("tampering", list(TAMPERINGS))
async def test_a_chain_tampered_between_anchors_gets_no_anchor_but_an_alert(
    db_url: str, tmp_path: Path, tampering: str, caplog: pytest.LogCaptureFixture
) -> None:
    file = tmp_path / "anchors.jsonl"
    async with audit_log(db_url) as log, webhook() as receiver:
        anchors = await anchored_twice(writer(log, file, receiver), log, 6, 2)
        before = lines(file)
        assert json.loads(before[-1])["seq"] == 8

        await TAMPERINGS[tampering](log)
        await record(log, 2, "after")  # the chain goes on growing from the tampered head
        with caplog.at_level(logging.ERROR, logger=ALERT):
            assert await anchors.write() is None
            assert await anchors.write() is None  # every attempt is refused and counted
        assert lines(file) == before
        assert anchors.alerts == {"chain": 2, "history": 0}
        errors = [r.getMessage() for r in caplog.records if r.name == ALERT and r.levelno == logging.ERROR]
        assert len(errors) == 2
        assert all(message.startswith("audit anchor alert (chain): no anchor written") for message in errors)
        (told,) = alerts(receiver)  # told once, not at every attempt
        assert told["problem"] == "chain"
        assert "position 8" in str(told["reason"])
        assert [d.payload["seq"] for d in receiver.all() if d.payload.get("kind") == "audit.anchor"] == [6, 8]


@pytest.mark.parametrize("tampering", list(TAMPERINGS))
async def test_a_writer_started_afresh_reads_its_previous_anchor_back_from_the_file(
    db_url: str, tmp_path: Path, tampering: str
) -> None:
    file = tmp_path / "anchors.jsonl"
    async with audit_log(db_url) as log:
        await record(log, 6)
        assert await writer(log, file).write() is not None
        before = lines(file)
        await TAMPERINGS[tampering](log)
        await record(log, 1, "after")
        restarted = writer(log, file)
        assert await restarted.write() is None
        assert lines(file) == before
        assert restarted.alerts["chain"] == 1


async def test_an_intact_chain_is_anchored_again_and_again(db_url: str, tmp_path: Path) -> None:
    file = tmp_path / "anchors.jsonl"
    async with audit_log(db_url) as log:
        anchors = writer(log, file)
        for _ in range(3):
            await record(log, 2)
            assert await anchors.write() is not None
        assert await writer(log, file).write() is not None  # a fresh writer too
        assert [json.loads(line)["seq"] for line in lines(file)] == [2, 4, 6, 6]
        assert anchors.alerts == {"chain": 0, "history": 0}


async def test_an_event_edited_before_the_first_anchor_is_found_by_walking_the_whole_chain(
    db_url: str, tmp_path: Path
) -> None:
    """No anchor to start from (no file yet): the whole chain is walked before the first anchor."""
    async with audit_log(db_url) as log:
        await record(log, 4)
        assert (await log.head())[0] == 4  # linked, so the edit below changes a linked event
        await sql(log, "UPDATE audit_events SET actor = 'mallory' WHERE seq = 2")
        anchors = writer(log, tmp_path / "anchors.jsonl")
        assert await anchors.write() is None
        assert lines(tmp_path / "anchors.jsonl") == []
        assert anchors.alerts["chain"] == 1


async def test_an_anchor_file_emptied_under_a_running_writer_raises_a_history_alert(
    db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The writer still knows its last anchor: the chain holds it, so the new anchor is written."""
    file = tmp_path / "anchors.jsonl"
    async with audit_log(db_url) as log, webhook() as receiver:
        anchors = await anchored_twice(writer(log, file, receiver), log, 3, 3)
        file.write_text(lines(file)[0] + "\n")  # the last line removed
        await record(log, 1, "after")
        with caplog.at_level(logging.ERROR, logger=ALERT):
            assert await anchors.write() is not None
        assert anchors.alerts == {"chain": 0, "history": 1}
        assert "its last lines were removed" in caplog.text
        file.write_text("")
        assert await anchors.write() is not None
        assert anchors.alerts == {"chain": 0, "history": 2}
        assert [alert["problem"] for alert in alerts(receiver)] == ["history", "history"]
        assert "it was emptied" in str(alerts(receiver)[-1]["reason"])


async def test_writers_sharing_a_file_take_turns_so_its_positions_only_grow(db_url: str, tmp_path: Path) -> None:
    """Two writers (two workers' anchors on one file) and events recorded meanwhile: no line goes backwards."""
    file = tmp_path / "anchors.jsonl"
    async with audit_log(db_url) as log:
        first, second = writer(log, file), writer(log, file)

        async def anchoring(anchors: AuditAnchors) -> None:
            for _ in range(10):
                assert await anchors.write() is not None

        async def recording() -> None:
            for number in range(20):
                await record(log, 1, f"busy-{number}")

        await asyncio.gather(anchoring(first), anchoring(second), recording())
        positions = [json.loads(line)["seq"] for line in lines(file)]
        assert len(positions) == 20
        assert positions == sorted(positions)


async def test_a_chain_linked_while_it_is_walked_is_never_taken_for_a_tampered_one(db_url: str) -> None:
    """Each walk ends by looking for events past the head; events linked meanwhile (with their new head)
    must not count. On PostgreSQL each statement sees what committed before it: the head is read after
    the events, or a walk now and then names a freshly linked event "inserted outside the audit log"."""
    async with audit_log(db_url) as log:
        await record(log, 1)
        walking = True

        async def linking() -> None:
            number = 0
            while walking:
                await record(log, 1, f"busy-{number}")
                await log.link()
                number += 1

        linker = asyncio.create_task(linking())
        try:
            walks = [await log.verify_since([]) for _ in range(150)]
        finally:
            walking = False
            await linker
        assert [walk.broken for walk in walks if not walk.ok] == []


async def test_the_alert_reaches_the_anchor_channels_as_a_message(db_url: str, tmp_path: Path) -> None:
    """An e-mail channel (Apprise, to a real SMTP server on 127.0.0.1) gets the alert, titled as one."""
    smtp = SmtpReceiver().start()
    try:
        channels = {"auditors": AppriseChannelOptions(urls=[smtp.url(to="auditors@example.com")])}
        options = AnchorOptions(interval_s=60, file=tmp_path / "anchors.jsonl", channels=["auditors"])
        async with audit_log(db_url) as log:
            anchors = AuditAnchors(options, log, channels=channels)
            await record(log, 5)
            assert await anchors.write() is not None
            await delete_tail(log)
            assert await anchors.write() is None
    finally:
        smtp.stop()
    (anchored, alerted) = smtp.texts()
    assert anchored[0] == "mcp-approval audit anchor at position 5"
    assert alerted[0] == "mcp-approval audit anchor ALERT: the audit chain does not hold its last anchor"
    assert "the chain ends at 2, before the anchored position 5" in alerted[1]
    assert '"kind":"audit.anchor.alert"' in alerted[1]
