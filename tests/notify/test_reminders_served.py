"""Reminders and escalations of a real ``serve``, in real time (seconds), told to real Standard Webhooks receivers.

The treasury example's ``treasury`` template reminds its approvers after 2 s on one channel and
escalates to ``admin`` after 4 s on another, and lets ``admin`` decide once escalated. A request
nobody answers is reminded, then escalated; erin (``admin``) may decide it only after that, and
her approval runs the call. The request shows who was told when, on which channel, in the reviewer
API, the console and ``review show``; ``audit verify`` finds the chain intact. Then several
``serve`` workers on one PostgreSQL store send each reminder and each escalation once.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from mcp_approval.cli.main import app
from tests.support.polling import eventually
from tests.support.receivers import WEBHOOK_SECRET, Delivery, WebhookReceiver
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals
from tests.treasury.helpers import approval_for, settled, transfers_to

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

REMIND_S, ESCALATE_S = 2.0, 4.0
runner = CliRunner()


def reminding(tmp_path: Path, team: WebhookReceiver, leads: WebhookReceiver, **timing: float) -> Path:
    channels = {
        "team": {"kind": "webhook", "url": team.url, "secret": WEBHOOK_SECRET},
        "leads": {"kind": "webhook", "url": leads.url, "secret": WEBHOOK_SECRET},
    }
    notifications = {"channels": channels, "poll_interval_s": 0.1, "retry_initial_s": 0.1, "retry_max_s": 0.5}
    notifications |= {"lease_s": scaled(5.0), "timeout_s": scaled(2.0)}
    treasury = {
        "approvals_required": 1,
        "reviewer_role": "approver",
        "notify": ["team"],
        "remind_after_s": timing.get("remind", REMIND_S),
        "escalate_after_s": timing.get("escalate", ESCALATE_S),
        "escalate_to": "admin",
        "escalate_notify": ["leads"],
        "escalation_may_decide": True,
    }
    return deployment_dir(tmp_path, {"notifications": notifications, "templates": {"treasury": treasury}})


@pytest.fixture
def receivers() -> Iterator[tuple[WebhookReceiver, WebhookReceiver]]:
    team, leads = WebhookReceiver().start(), WebhookReceiver().start()
    yield team, leads
    team.stop()
    leads.stop()


def about(receiver: WebhookReceiver, request_id: str) -> list[dict[str, Any]]:
    return [d.payload for d in receiver.accepted() if d.payload["data"]["request_id"] == request_id]


def at(payload: dict[str, Any]) -> float:
    return datetime.fromisoformat(payload["timestamp"].replace("Z", "+00:00")).timestamp()


def visible(html: str) -> str:
    """The text of an HTML fragment, tags dropped and spaces collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


async def cli(*args: str) -> str:
    """``mcp-approval ARGS`` (in a thread: the command runs an event loop of its own); its output."""
    result = await asyncio.to_thread(runner.invoke, app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


async def test_a_request_nobody_answers_is_reminded_then_escalated_and_the_escalation_role_decides(
    tmp_path: Path, db_url: str, receivers: tuple[WebhookReceiver, WebhookReceiver]
) -> None:
    team, leads = receivers
    directory = reminding(tmp_path, team, leads)
    server = await asyncio.to_thread(TreasuryServer(directory, db_url=db_url).start)
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            alice, carol, erin = principals(http)["alice"], Reviewer(http, "carol-token"), Reviewer(http, "erin-token")
            task = (await alice.call_tool("wire_transfer", {"to": "acct-r1", "amount": 30_000})).result["taskId"]
            request = await approval_for(carol, "wire_transfer", to="acct-r1")
            request_id = request["id"]
            # Before it escalates, erin (admin) neither sees nor decides it.
            assert await erin.pending() == []
            early = await erin.decide(request_id, "approve")
            assert early.status_code in (403, 404), early.text

            await eventually(
                lambda: asyncio.sleep(0, [p["type"] for p in about(team, request_id)]),
                lambda types: types == ["approval.requested", "approval.reminder"],
                timeout_s=scaled(30),
            )
            await eventually(
                lambda: asyncio.sleep(0, [p["type"] for p in about(leads, request_id)]),
                lambda types: types == ["approval.escalated"],
                timeout_s=scaled(30),
            )
            requested, reminder = about(team, request_id)
            (escalation,) = about(leads, request_id)
            assert at(reminder) - at(requested) >= REMIND_S - 0.01, "not before remind_after_s"
            assert at(escalation) - at(requested) >= ESCALATE_S - 0.01, "not before escalate_after_s"
            assert reminder["data"]["told"] == "approver"
            assert escalation["data"]["told"] == "admin"

            # Once escalated, erin sees it and decides it, and the call runs.
            shown = await eventually(erin.pending, lambda items: [i["id"] for i in items] == [request_id])
            assert shown[0]["tool"] == "wire_transfer"
            decided = await erin.decide(request_id, "approve", "nobody else answered")
            assert decided.status_code == 200, decided.text
            assert (await settled(alice, task))["status"] == "completed"
            assert len(transfers_to(server, "acct-r1")) == 1

            # Who was told, when, on which channel: the reviewer API ...
            body = await eventually(
                lambda: _record(http, request_id), lambda record: len(record["told"]) == 2, timeout_s=scaled(10)
            )
            told = [(t["step"], t["role"], t["channel"]) for t in body["told"]]
            assert told == [("remind", "approver", "team"), ("escalate", "admin", "leads")]
            # ... and the console's request page.
            signed_in = await http.post("/console/login", data={"token": "carol-token"})
            assert signed_in.status_code == 303, signed_in.text
            page = await http.get(f"/console/requests/{request_id}")
            assert page.status_code == 200
            assert 'id="told"' in page.text
            assert (
                'reminder</span>\n        to <strong>approver</strong> on <span class="mono">team</span>' in page.text
            )
            assert (
                'escalation</span>\n        to <strong>admin</strong> on <span class="mono">leads</span>' in page.text
            )
            assert "approval.escalated" in page.text
            assert "approval.told" in page.text
    finally:
        server.kill()

    config = str(directory / "config.toml")
    shown_text = await cli("review", "show", request_id, "--config", config, "--db", db_url)
    told_lines = [line for line in shown_text.splitlines() if "told" in line]
    assert any("reminder to approver on team" in line for line in told_lines), shown_text
    assert any("escalation to admin on leads" in line for line in told_lines), shown_text
    assert "audit chain intact" in await cli("audit", "verify", "--config", config, "--db", db_url)


async def _record(http: httpx.AsyncClient, request_id: str) -> dict[str, Any]:
    response = await http.get(f"/approvals/{request_id}", headers={"authorization": "Bearer carol-token"})
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_a_reminder_due_while_the_server_was_down_is_sent_once_after_its_restart(
    tmp_path: Path, db_url: str, receivers: tuple[WebhookReceiver, WebhookReceiver]
) -> None:
    team, leads = receivers
    directory = reminding(tmp_path, team, leads)
    server = await asyncio.to_thread(TreasuryServer(directory, db_url=db_url).start)
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            await principals(http)["alice"].call_tool("wire_transfer", {"to": "acct-down", "amount": 30_000})
            request_id = (await approval_for(Reviewer(http, "carol-token"), "wire_transfer", to="acct-down"))["id"]
    finally:
        server.kill()  # SIGKILL before either step is due
    down_at = time.monotonic()
    assert [p["type"] for p in about(team, request_id)] in ([], ["approval.requested"])
    # Both steps come due while nothing runs.
    await asyncio.sleep(max(0.0, ESCALATE_S + 0.5 - (time.monotonic() - down_at)))
    assert about(leads, request_id) == []
    restarted = await asyncio.to_thread(TreasuryServer(directory, db_url=db_url).start)
    try:
        await eventually(
            lambda: asyncio.sleep(0, ([p["type"] for p in about(team, request_id)], about(leads, request_id))),
            lambda found: found[0] == ["approval.requested", "approval.reminder"] and len(found[1]) == 1,
            timeout_s=scaled(30),
        )
        await asyncio.sleep(1.0)  # more rounds: nothing is sent again
    finally:
        restarted.kill()
    assert [p["type"] for p in about(team, request_id)] == ["approval.requested", "approval.reminder"]
    assert [p["type"] for p in about(leads, request_id)] == ["approval.escalated"]
    config = str(directory / "config.toml")
    assert "audit chain intact" in await cli("audit", "verify", "--config", config, "--db", db_url)


@pytest.mark.postgres
async def test_several_workers_on_postgresql_send_each_reminder_and_escalation_once(
    tmp_path: Path, postgres_url: str, receivers: tuple[WebhookReceiver, WebhookReceiver]
) -> None:
    team, leads = receivers
    directory = reminding(tmp_path, team, leads, remind=1.0, escalate=2.0)
    workers = [TreasuryServer(directory, db_url=postgres_url) for _ in range(3)]
    with contextlib.ExitStack() as stack:
        for worker in workers:
            await asyncio.to_thread(worker.start, timeout_s=scaled(90))
            stack.callback(worker.kill)
        ids = []
        for n, worker in enumerate(workers):  # one request through each worker
            async with httpx.AsyncClient(base_url=worker.base_url, timeout=scaled(20)) as http:
                await principals(http)["alice"].call_tool("wire_transfer", {"to": f"acct-w{n}", "amount": 30_000 + n})
                ids.append((await approval_for(Reviewer(http, "carol-token"), "wire_transfer", to=f"acct-w{n}"))["id"])

        def counts() -> Counter[tuple[str, str]]:
            return Counter((d.payload["data"]["request_id"], d.payload["type"]) for d in _all(team, leads))

        wanted = {(i, t) for i in ids for t in ("approval.requested", "approval.reminder", "approval.escalated")}
        await eventually(lambda: asyncio.sleep(0, counts()), lambda found: wanted <= set(found), timeout_s=scaled(40))
        # Every worker keeps polling every 0.1 s: a second of more rounds sends nothing again.
        await asyncio.sleep(1.0)
    found = counts()
    assert {key: found[key] for key in wanted} == dict.fromkeys(wanted, 1), found
    reminders = [d for d in _all(team, leads) if d.payload["type"] in ("approval.reminder", "approval.escalated")]
    assert len(reminders) == 2 * len(ids), "each reminder and each escalation sent once, by one worker"
    assert all(d.verified for d in team.all() + leads.all())
    config = str(directory / "config.toml")
    assert "audit chain intact" in await cli("audit", "verify", "--config", config, "--db", postgres_url)


def _all(*receivers: WebhookReceiver) -> list[Delivery]:
    return [delivery for receiver in receivers for delivery in receiver.accepted()]
