"""Notifications of a real ``serve``: Standard Webhooks verified by a local receiver, delivered in
order per request even when the receiver refuses the first attempts, and after a SIGKILL between
a delivery and its record, again with the same ``webhook-id``."""

from __future__ import annotations

import asyncio
import re
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcp_approval.approval import messages
from mcp_approval.config import ConfigError, load_config
from mcp_approval.demo.servers import materialize
from mcp_approval.server.deployment import build_deployment
from mcp_approval.storage import all_cursors
from tests.approval.inprocess import inprocess_treasury
from tests.support.polling import eventually
from tests.support.receivers import WEBHOOK_SECRET, Delivery, SmtpReceiver, WebhookReceiver
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals, to_toml
from tests.treasury.helpers import approval_for, assert_denied_not_executed, settled

pytestmark = pytest.mark.anyio

APPROVED = ["approval.requested", "approval.decided", "approval.approved", "approval.executed"]
SCRAPE_TOKEN = "scrape-token-of-some-length"
DENIED = ["approval.requested", "approval.decided", "approval.denied", "approval.executed"]
#: Nobody decides: the request lapses, then its task ends as a denial.
EXPIRED = ["approval.requested", "approval.expired", "approval.executed"]
#: The requester cancels the task: it is fenced (ended, never run), then its request is withdrawn.
CANCELLED = ["approval.requested", "approval.executed", "approval.cancelled"]


def _notified(tmp_path: Path, receiver: WebhookReceiver, **schedule: Any) -> Path:
    """The treasury example with a webhook channel for its ``treasury`` template, retried fast, metrics on."""
    return deployment_dir(tmp_path, _notified_overrides(receiver, **schedule))


def _notified_overrides(receiver: WebhookReceiver, **schedule: Any) -> dict[str, dict[str, Any]]:
    """The overrides of :func:`_notified`."""
    channel = {"kind": "webhook", "url": receiver.url, "secret": WEBHOOK_SECRET}
    notifications = {"channels": {"hook": channel}, "poll_interval_s": 0.05, "retry_initial_s": 0.05}
    notifications |= {"retry_max_s": 0.2, "lease_s": scaled(2.0), "timeout_s": scaled(1.5)} | schedule
    template = {"approvals_required": 1, "reviewer_role": "approver", "notify": ["hook"]}
    metrics = {"enabled": True, "bearer_token": SCRAPE_TOKEN}
    return {"notifications": notifications, "templates": {"treasury": template}, "metrics": metrics}


_DELIVERED = ("mcp_approval_notification_deliveries_total", (("channel", "hook"),))
_FAILED = ("mcp_approval_notification_failures_total", (("channel", "hook"),))


async def _scrape(http: httpx.AsyncClient) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = await http.get("/metrics", headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"})
    assert response.status_code == 200, response.text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def _by_request(deliveries: list[Delivery]) -> dict[str, list[str]]:
    """The notification types each request's accepted deliveries carried, in arrival order (first copy of an id)."""
    seen: set[str] = set()
    found: dict[str, list[str]] = defaultdict(list)
    for delivery in deliveries:
        if delivery.webhook_id in seen:
            continue
        seen.add(delivery.webhook_id)
        payload = delivery.payload
        found[payload["data"]["request_id"]].append(payload["type"])
    return dict(found)


async def test_a_receiver_refusing_the_first_attempts_gets_every_event_in_order(tmp_path: Path) -> None:
    receiver = WebhookReceiver(refuse_first=4).start()
    server = await asyncio.to_thread(TreasuryServer(_notified(tmp_path, receiver)).start)
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            alice, carol = principals(http)["alice"], Reviewer(http, "carol-token")
            approved = (await alice.call_tool("wire_transfer", {"to": "acct-n1", "amount": 30_000})).result["taskId"]
            denied = (await alice.call_tool("wire_transfer", {"to": "acct-n2", "amount": 40_000})).result["taskId"]
            first = await approval_for(carol, "wire_transfer", to="acct-n1")
            second = await approval_for(carol, "wire_transfer", to="acct-n2")
            assert (await carol.decide(first["id"], "approve")).status_code == 200
            assert (await carol.decide(second["id"], "deny", "not this quarter")).status_code == 200
            await settled(alice, approved)
            await settled(alice, denied)
            await eventually(
                lambda: asyncio.sleep(0, _by_request(receiver.accepted())),
                lambda found: found.get(first["id"]) == APPROVED and found.get(second["id"]) == DENIED,
            )
            # The cursor moves just after the receiver answers: wait for the last one to be recorded.
            await eventually(
                lambda: _scrape(http), lambda found: found.get(_DELIVERED) == 8 and found.get(_FAILED) == 4
            )
    finally:
        server.kill()
        receiver.stop()

    deliveries = receiver.all()
    assert all(d.verified for d in deliveries), "every attempt carries a valid Standard Webhooks signature"
    refused = [d for d in deliveries if not d.accepted]
    assert len(refused) == 4
    # The refused attempts were the first event, each time exactly as it was later accepted.
    accepted = receiver.accepted()
    assert {d.webhook_id for d in refused} == {accepted[0].webhook_id}
    assert {d.body for d in refused} == {accepted[0].body}
    assert len({d.webhook_id for d in accepted}) == len(accepted) == 8, "each event once when nothing crashed"

    executed = [d.payload["data"] for d in accepted if d.payload["type"] == "approval.executed"]
    assert {(e["request_id"], e["outcome"]) for e in executed} == {
        (first["id"], "approved-executed"),
        (second["id"], "denied-not-executed"),
    }
    opened = accepted[0].payload["data"]
    assert opened["tool"] == "wire_transfer"
    assert opened["requester"] == "alice"
    assert opened["template"] == "treasury"
    assert opened["approvals"] == {"given": 0, "required": 1}
    assert opened["deadline"]
    assert opened["console_url"] == f"{server.base_url}/console/requests/{opened['request_id']}"
    decided = next(d.payload["data"] for d in accepted if d.payload["type"] == "approval.decided")
    assert decided["approvals"]["given"] == 1
    assert (decided["decision"], decided["reviewer"]) == ("approve", "carol")
    everything = b"".join(d.body for d in deliveries).decode()
    for secret in ("carol-token", "alice-token", "3q2+7wABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhs=", WEBHOOK_SECRET):
        assert secret not in everything


async def test_a_serve_killed_before_or_after_sending_delivers_after_restart(tmp_path: Path) -> None:
    receiver = WebhookReceiver().start()
    server = TreasuryServer(_notified(tmp_path, receiver))
    await asyncio.to_thread(server.start)
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            alice, carol = principals(http)["alice"], Reviewer(http, "carol-token")
            task = (await alice.call_tool("wire_transfer", {"to": "acct-n3", "amount": 30_000})).result["taskId"]
            pending = await approval_for(carol, "wire_transfer", to="acct-n3")
            await eventually(lambda: asyncio.sleep(0, _by_request(receiver.accepted())), lambda found: bool(found))
            # The receiver goes down; the decision commits; its notification cannot be delivered.
            receiver.down = True
            assert (await carol.decide(pending["id"], "approve")).status_code == 200
            await settled(alice, task)
            await eventually(
                lambda: asyncio.sleep(0, [d for d in receiver.all() if not d.accepted]),
                lambda refused: any(d.payload["type"] == "approval.decided" for d in refused),
            )
        # Killed between the state change and its delivery.
        await asyncio.to_thread(server.kill)
        receiver.down = False
        # Restarted armed to die right after the next send, before the cursor records it.
        await asyncio.to_thread(server.start, env={"MCP_APPROVAL_CRASH_AT": "after_notification_sent"})
        assert await asyncio.to_thread(server.wait_exit) != 0
        await asyncio.to_thread(server.start)
        await eventually(
            lambda: asyncio.sleep(0, _by_request(receiver.accepted())),
            lambda found: found.get(pending["id"]) == APPROVED,
        )
    finally:
        server.kill()
        receiver.stop()

    accepted = receiver.accepted()
    types = [d.payload["type"] for d in accepted]
    assert types == ["approval.requested", "approval.decided", *APPROVED[1:]], "sent again, then in order"
    assert accepted[1].webhook_id == accepted[2].webhook_id, "the event sent before the kill comes again, same id"
    assert accepted[1].body == accepted[2].body
    assert len({d.webhook_id for d in accepted}) == len(APPROVED)
    assert all(d.verified for d in receiver.all())


#: A deadline of seconds for transfers to "expiring-" accounts (the demo's rule), so a request can lapse in a test.
_EXPIRING_RULE = """
@requestable("treasury")
@deadline("PT2S")
forbid (principal in Role::"treasurer", action == Action::"tools/call", resource == tool::"wire_transfer")
when { context.arguments.amount.greaterThan(decimal("25000.0")) && context.arguments.to like "expiring-*" }
unless { context has approval };
"""


async def test_an_expired_and_a_cancelled_request_are_notified(tmp_path: Path) -> None:
    receiver = WebhookReceiver().start()
    directory = _notified(tmp_path, receiver)
    with (directory / "policy.cedar").open("a") as policy:
        policy.write(_EXPIRING_RULE)
    server = await asyncio.to_thread(TreasuryServer(directory).start)
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            alice, carol = principals(http)["alice"], Reviewer(http, "carol-token")
            lapsing = (await alice.call_tool("wire_transfer", {"to": "expiring-n4", "amount": 30_000})).result
            withdrawn = (await alice.call_tool("wire_transfer", {"to": "acct-n5", "amount": 30_000})).result
            expired = await approval_for(carol, "wire_transfer", to="expiring-n4", ended_too=True)
            cancelled = await approval_for(carol, "wire_transfer", to="acct-n5")
            assert "error" not in (await alice.cancel(withdrawn["taskId"])).body
            assert (await settled(alice, withdrawn["taskId"]))["status"] == "cancelled"
            assert_denied_not_executed(await settled(alice, lapsing["taskId"]))
            await eventually(
                lambda: asyncio.sleep(0, _by_request(receiver.accepted())),
                lambda found: found.get(expired["id"]) == EXPIRED and found.get(cancelled["id"]) == CANCELLED,
            )
    finally:
        server.kill()
        receiver.stop()

    data = {(d.payload["data"]["request_id"], d.payload["type"]): d.payload["data"] for d in receiver.accepted()}
    for request, kind in ((expired, "approval.expired"), (cancelled, "approval.cancelled")):
        ended = data[(request["id"], kind)]
        assert (ended["tool"], ended["requester"], ended["template"]) == ("wire_transfer", "alice", "treasury")
        assert ended["progress"] == "0 of 1 approval"
        assert ended["console_url"] == f"{server.base_url}/console/requests/{request['id']}"
    lapsed = data[(expired["id"], "approval.executed")]
    assert (lapsed["outcome"], lapsed["reason"]) == ("denied-not-executed", messages.EXPIRED)
    assert data[(cancelled["id"], "approval.executed")]["outcome"] == "cancelled"
    assert len(receiver.accepted()) == len(EXPIRED) + len(CANCELLED), "each event once"
    assert all(d.verified for d in receiver.all())


async def test_a_notification_being_sent_when_the_server_stops_is_sent_once_and_recorded(tmp_path: Path) -> None:
    """A stop lets the send in flight finish and move the cursor, rather than cutting it off mid-POST
    (which would leave the event to be sent again by the next worker)."""
    receiver = WebhookReceiver(hold=threading.Event()).start()
    try:
        # The held POST must not time out on a loaded machine before the test lets it answer.
        overrides = _notified_overrides(receiver, timeout_s=scaled(20.0), lease_s=scaled(30.0))
        async with inprocess_treasury(tmp_path, overrides) as harness:
            await harness.alice.call_tool("wire_transfer", {"to": "acct-stop", "amount": 30_000})
            await eventually(lambda: asyncio.to_thread(receiver.all), lambda seen: len(seen) == 1)
            outbox = harness.deployment.approvals.outbox
            assert outbox is not None
            stopping = asyncio.create_task(outbox.stop())
            await asyncio.sleep(0)  # one turn: the stop has begun
            assert receiver.hold is not None
            receiver.hold.set()
            await stopping
            (cursor,) = await all_cursors(harness.deployment.approval.store.database)
    finally:
        receiver.stop()
    assert (cursor.consumer, cursor.delivered, cursor.failures) == ("notify:hook", 1, 0)
    assert [d.payload["type"] for d in receiver.accepted()] == ["approval.requested"]


def test_a_template_naming_an_unknown_channel_is_refused(tmp_path: Path) -> None:
    template = {"approvals_required": 1, "notify": ["nowhere"]}
    directory = deployment_dir(tmp_path, {"templates": {"treasury": template}})
    with pytest.raises(ConfigError, match=r"templates\.treasury\.notify: no channel 'nowhere'"):
        load_config(directory / "config.toml")


def test_a_webhook_secret_that_is_not_a_signing_secret_is_refused(tmp_path: Path) -> None:
    channel = {"kind": "webhook", "url": "http://127.0.0.1:9/hook", "secret": "hunter2"}
    directory = deployment_dir(tmp_path, {"notifications": {"channels": {"hook": channel}}})
    with pytest.raises(ConfigError, match=r"notifications\.channels\.hook\.webhook\.secret") as caught:
        load_config(directory / "config.toml")
    assert "hunter2" not in str(caught.value)


async def test_email_reaches_a_plain_smtp_server_through_apprise(tmp_path: Path) -> None:
    smtp = SmtpReceiver().start()
    notifications = {
        "channels": {"mail": {"kind": "apprise", "urls": [smtp.url()]}},
        "poll_interval_s": 0.05,
        "console_url": "https://approvals.example.com",
    }
    template = {"approvals_required": 2, "reviewer_role": "approver", "notify": ["mail"]}
    overrides = {"notifications": notifications, "templates": {"close_quarter": template}}
    # The argument is redacted for reviewers: the email shows it as the console does.
    overrides["approval"] = {"redact_arguments": ["quarter"]}
    directory = deployment_dir(tmp_path, overrides)
    server = await asyncio.to_thread(TreasuryServer(directory).start)
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            alice, carol = principals(http)["alice"], Reviewer(http, "carol-token")
            await alice.call_tool("close_quarter", {"quarter": "2026-Q1"})
            pending = await approval_for(carol, "close_quarter")
            assert (await carol.decide(pending["id"], "approve")).status_code == 200
            texts = await eventually(lambda: asyncio.sleep(0, smtp.texts()), lambda found: len(found) >= 2)
    finally:
        server.kill()
        smtp.stop()

    (opened_subject, opened), (decided_subject, decided) = texts[:2]
    assert opened_subject.startswith("Approval requested: close_quarter")
    assert decided_subject.startswith("Decision recorded: close_quarter")
    assert "Requested by: alice" in opened
    assert "Template: close_quarter" in opened
    assert "Progress: 0 of 2 approvals" in opened
    assert "Progress: 1 of 2 approvals" in decided
    assert "Decision: approve by carol" in decided
    assert f"https://approvals.example.com/console/requests/{pending['id']}" in opened
    assert "sign-in required" in opened
    assert "alice-token" not in opened + decided
    assert "Arguments: quarter: [redacted]" in opened
    assert "2026-Q1" not in opened + decided


def test_an_apprise_url_it_does_not_know_is_refused_without_repeating_it(tmp_path: Path) -> None:
    channel = {"kind": "apprise", "urls": ["nosuchservice://secret-token@host"]}
    directory = deployment_dir(tmp_path, {"notifications": {"channels": {"team": channel}}})
    with pytest.raises(
        ConfigError, match=r"notifications\.channels\.team\.urls\[0\]: not a URL Apprise supports"
    ) as caught:
        build_deployment(load_config(directory / "config.toml"), base_url="http://127.0.0.1:1")
    assert "secret-token" not in str(caught.value)


def test_channels_with_the_arap_backend_are_refused(tmp_path: Path) -> None:
    config_path = materialize(tmp_path / "demo").with_name("config-arap.toml")
    channel = {"kind": "webhook", "url": "http://127.0.0.1:9/hook", "secret": WEBHOOK_SECRET}
    text = config_path.read_text() + "\n" + to_toml({"notifications": {"channels": {"hook": channel}}})
    config_path.write_text(text)
    with pytest.raises(ConfigError, match=r"notifications\.channels: notifications tell about the local"):
        build_deployment(load_config(config_path), base_url="http://127.0.0.1:1")


async def test_hostile_arguments_reach_the_email_as_text_on_their_lines(tmp_path: Path, db_url: str) -> None:
    """Over MCP, a caller's argument name with a newline and a value with HTML reach reviewers inert."""
    smtp = SmtpReceiver().start()
    console = "https://approvals.example.com"
    notifications = {"channels": {"mail": {"kind": "apprise", "urls": [smtp.url()]}}, "poll_interval_s": 0.05}
    notifications["console_url"] = console
    template = {"approvals_required": 1, "reviewer_role": "approver", "notify": ["mail"]}
    directory = deployment_dir(tmp_path, {"notifications": notifications, "templates": {"treasury": template}})
    link = '<a href="https://attacker.example/ok">APPROVE NOW</a><img src="https://attacker.example/p.png">'
    arguments = {"to": "acct-hostile", "amount": 30_000, "memo\nDecision: approve by carol": link}
    server = await asyncio.to_thread(TreasuryServer(directory, db_url=db_url).start)
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            await principals(http)["alice"].call_tool("wire_transfer", arguments)
            pending = await approval_for(Reviewer(http, "carol-token"), "wire_transfer", to="acct-hostile")
            messages = await eventually(lambda: asyncio.sleep(0, list(smtp.messages)), lambda found: len(found) >= 1)
    finally:
        server.kill()
        smtp.stop()
    plain_part, html_part = messages[0].get_body(("plain",)), messages[0].get_body(("html",))
    assert plain_part is not None
    assert html_part is not None
    plain, html = str(plain_part.get_content()), str(html_part.get_content())
    assert [line for line in plain.splitlines() if line.startswith("Decision")] == []
    (arguments_line,) = [line for line in plain.splitlines() if line.startswith("Arguments:")]
    assert "memo\\nDecision: approve by carol" in arguments_line
    assert "Requested by: alice" in plain.splitlines()
    assert "<img" not in html
    assert "&lt;img src=" in html
    assert re.findall(r'href="([^"]*)"', html) == [f"{console}/console/requests/{pending['id']}"]
