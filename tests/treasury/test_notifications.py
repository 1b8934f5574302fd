"""Notifications of a real ``serve``: Standard Webhooks verified by a local receiver, delivered in
order per request even when the receiver refuses the first attempts, and after a SIGKILL between
a delivery and its record, again with the same ``webhook-id``."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcp_approval.config import ConfigError, load_config
from tests.support.polling import eventually
from tests.support.receivers import WEBHOOK_SECRET, Delivery, WebhookReceiver
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals
from tests.treasury.helpers import approval_for, settled

pytestmark = pytest.mark.anyio

APPROVED = ["approval.requested", "approval.decided", "approval.approved", "approval.executed"]
DENIED = ["approval.requested", "approval.decided", "approval.denied", "approval.executed"]


def _notified(tmp_path: Path, receiver: WebhookReceiver, **schedule: Any) -> Path:
    channel = {"kind": "webhook", "url": receiver.url, "secret": WEBHOOK_SECRET}
    notifications = {"channels": {"hook": channel}, "poll_interval_s": 0.05, "retry_initial_s": 0.05}
    notifications |= {"retry_max_s": 0.2, "lease_s": 1.0} | schedule
    template = {"approvals_required": 1, "reviewer_role": "approver", "notify": ["hook"]}
    return deployment_dir(tmp_path, {"notifications": notifications, "templates": {"treasury": template}})


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
        async with httpx.AsyncClient(base_url=server.base_url, timeout=20) as http:
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
        async with httpx.AsyncClient(base_url=server.base_url, timeout=20) as http:
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
