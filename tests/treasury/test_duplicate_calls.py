"""Duplicates said out loud: a further identical call after an outcome was collected is not a fresh request.

A real ``serve`` on 127.0.0.1 (SQLite and PostgreSQL), with a webhook and an email channel. Once
a call's request ended and its outcome was collected, the same principal's identical call opens
a new request, and both sides are told: the caller's answer names the earlier call (its
reference, when it ended, its outcome), and reviewers see "Possible duplicate of <request>,
executed at <time>" on the new request in the reviewer API, the console, ``mcp-approval review``
and every notification about it. A call with other arguments, or another principal's identical
call, shows nothing of the kind.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from mcp_approval.checks.wire import envelope
from tests.support.polling import eventually
from tests.support.receivers import WEBHOOK_SECRET, WebhookReceiver
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals
from tests.treasury.helpers import DISPOSITION, IMMEDIATE, console_page, settled, text_of

pytestmark = pytest.mark.anyio

CONSOLE = "https://approvals.example.com"
NO_TASKS = envelope(tasks=False, elicitation=False)


@dataclass
class Notified:
    """A treasury server whose ``treasury`` template notifies a webhook."""

    server: TreasuryServer
    hook: WebhookReceiver
    db_url: str | None

    def review(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``mcp-approval review ARGS`` on this deployment's store, as its own process."""
        command = [sys.executable, "-m", "mcp_approval", "review", *args]
        command += ["--config", str(self.server.directory / "config.toml")]
        if self.db_url is not None:
            command += ["--db", self.db_url]
        return subprocess.run(command, capture_output=True, text=True, timeout=scaled(60), check=False)


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def notified(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Notified]:
    # The people's channels (email, Slack, Teams) show the same data as lines of text: Apprise spaces
    # a channel's messages out by seconds, so tests/notify/test_notification_bodies.py checks those formats.
    hook = WebhookReceiver().start()
    channels = {"hook": {"kind": "webhook", "url": hook.url, "secret": WEBHOOK_SECRET}}
    notifications = {"channels": channels, "poll_interval_s": 0.05, "console_url": CONSOLE}
    template = {"approvals_required": 1, "reviewer_role": "approver", "notify": ["hook"]}
    overrides = {"notifications": notifications, "templates": {"treasury": template}}
    directory = deployment_dir(tmp_path_factory.mktemp("duplicates"), overrides)
    db_url = None if request.param == "sqlite" else str(request.getfixturevalue("module_postgres_url"))
    server = TreasuryServer(directory, db_url=db_url).start(timeout_s=scaled(90))
    try:
        yield Notified(server, hook, db_url)
    finally:
        server.kill()
        hook.stop()


@pytest.fixture
async def http(notified: Notified) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=notified.server.base_url, timeout=scaled(20)) as client:
        yield client


CAROL = {"authorization": "Bearer carol-token"}


async def pending_of(http: httpx.AsyncClient, requester: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The one pending request of ``requester``'s ``wire_transfer`` with exactly these arguments."""

    async def find() -> list[dict[str, Any]]:
        return [
            item
            for item in await Reviewer(http, "carol-token").pending()
            if item["requester"] == requester and item["arguments"] == arguments
        ]

    (found,) = await eventually(find, lambda items: len(items) == 1, timeout_s=scaled(60))
    return found


async def record(http: httpx.AsyncClient, request_id: str) -> dict[str, Any]:
    response = await http.get(f"/approvals/{request_id}", headers=CAROL)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def requested_notice(notified: Notified, request_id: str) -> dict[str, Any]:
    """The webhook data of the request's ``approval.requested``."""

    def webhook() -> list[dict[str, Any]]:
        return [
            d.payload["data"]
            for d in notified.hook.accepted()
            if d.payload["type"] == "approval.requested" and d.payload["data"]["request_id"] == request_id
        ]

    return (await eventually(lambda: asyncio.sleep(0, webhook()), lambda found: len(found) >= 1))[0]


async def assert_reviewers_are_warned(
    http: httpx.AsyncClient, notified: Notified, request_id: str, earlier: dict[str, Any], line: str
) -> None:
    """The new request names the earlier one, with ``line``, in the API, console, CLI and notifications."""
    shown = await record(http, request_id)
    assert shown["possible_duplicate_of"] == {**earlier, "text": line}
    listed = [item for item in await Reviewer(http, "carol-token").pending() if item["id"] == request_id]
    assert listed[0]["possible_duplicate_of"] == shown["possible_duplicate_of"]

    page = await console_page(http, "carol-token", f"/console/requests/{request_id}")
    assert page.status_code == 200
    assert f'<p class="flash warning" id="possible-duplicate">{line}' in page.text
    assert f'href="/console/requests/{earlier["request_id"]}"' in page.text
    queue = await console_page(http, "carol-token", "/console")
    assert f'title="{line}">possible duplicate</div>' in queue.text

    show, listing = await asyncio.gather(
        asyncio.to_thread(notified.review, "show", request_id),
        asyncio.to_thread(notified.review, "list"),
    )
    assert show.returncode == 0, show.stderr
    assert "possible_duplicate_of" in show.stdout
    assert line in " ".join(show.stdout.split())
    assert f"{request_id}: {line}" in listing.stdout.splitlines()

    notice = await requested_notice(notified, request_id)
    assert notice["possible_duplicate_of"] == shown["possible_duplicate_of"]


async def assert_nothing_said(http: httpx.AsyncClient, notified: Notified, answer: str, request_id: str) -> None:
    """No earlier identical call: neither the answer nor any reviewer surface speaks of one."""
    assert "This is a new request" not in answer
    assert (await record(http, request_id))["possible_duplicate_of"] is None
    page = await console_page(http, "carol-token", f"/console/requests/{request_id}")
    assert "possible-duplicate" not in page.text
    show = await asyncio.to_thread(notified.review, "show", request_id)
    assert show.returncode == 0, show.stderr
    assert "duplicate" not in show.stdout
    assert (await requested_notice(notified, request_id))["possible_duplicate_of"] is None


async def test_a_call_again_after_its_executed_outcome_was_collected_is_said_to_repeat_it(
    http: httpx.AsyncClient, notified: Notified
) -> None:
    alice = principals(http)["alice"]
    arguments = {"to": "acct-dup-ran", "amount": 30_000}
    first = (await alice.call_tool("wire_transfer", arguments)).result
    first_request = await pending_of(http, "alice", arguments)
    assert first_request["possible_duplicate_of"] is None
    assert (await Reviewer(http, "carol-token").decide(first_request["id"], "approve")).status_code == 200
    collected = await settled(alice, first["taskId"])
    assert collected["result"]["_meta"][DISPOSITION] == "approved-executed"
    ran_at = (await record(http, first_request["id"]))["outcome"]["at"]

    again = (await alice.call_tool("wire_transfer", arguments)).result
    assert again["resultType"] == "task"
    assert again["taskId"] != first["taskId"]
    said = again["_meta"][IMMEDIATE]
    assert (
        f"This is a new request: an identical call (reference {first['taskId']}) already ran at {ran_at} "
        "with outcome approved-executed; if this one is approved, the call runs again."
    ) in said
    second_request = await pending_of(http, "alice", arguments)
    earlier = {
        "request_id": first_request["id"],
        "task_id": first["taskId"],
        "outcome": "approved-executed",
        "ran": True,
        "ended_at": ran_at,
    }
    line = f"Possible duplicate of {first_request['id']}, executed at {ran_at} (approved-executed)."
    await assert_reviewers_are_warned(http, notified, second_request["id"], earlier, line)
    assert len([e for e in notified.server.ledger() if e.get("to") == "acct-dup-ran"]) == 1

    other = {"to": "acct-dup-ran", "amount": 31_000}  # other arguments: not the same call
    different = (await alice.call_tool("wire_transfer", other)).result
    await assert_nothing_said(
        http, notified, different["_meta"][IMMEDIATE], (await pending_of(http, "alice", other))["id"]
    )


async def test_a_call_again_after_its_denial_was_collected_is_said_to_repeat_it(
    http: httpx.AsyncClient, notified: Notified
) -> None:
    alice = principals(http)["alice"]
    arguments = {"to": "acct-dup-denied", "amount": 30_000}
    first = (await alice.call_tool("wire_transfer", arguments, meta=NO_TASKS)).result
    assert first["isError"] is True
    assert "This is a new request" not in text_of(first)
    first_request = await pending_of(http, "alice", arguments)
    assert (await Reviewer(http, "carol-token").decide(first_request["id"], "deny", "no invoice")).status_code == 200

    async def retry() -> dict[str, Any]:
        return (await alice.call_tool("wire_transfer", arguments, meta=NO_TASKS)).result

    collected = await eventually(retry, lambda result: DISPOSITION in result.get("_meta", {}))
    assert collected["_meta"][DISPOSITION] == "denied-not-executed"  # the outcome, collected
    outcome = (await record(http, first_request["id"]))["outcome"]
    ended_at, first_reference = outcome["at"], outcome["task_id"]

    again = await retry()
    text = text_of(again)
    assert again["isError"] is True
    assert DISPOSITION not in again["_meta"]
    assert "an approval request is now open" in text
    assert (
        f"This is a new request: an identical call (reference {first_reference}) was already asked for and ended "
        f"without running at {ended_at} with outcome denied-not-executed."
    ) in text
    second_request = await pending_of(http, "alice", arguments)
    earlier = {
        "request_id": first_request["id"],
        "task_id": first_reference,
        "outcome": "denied-not-executed",
        "ran": False,
        "ended_at": ended_at,
    }
    line = f"Possible duplicate of {first_request['id']}, ended without running at {ended_at} (denied-not-executed)."
    await assert_reviewers_are_warned(http, notified, second_request["id"], earlier, line)
    # Asking again while the new request is open joins it, and still says what it may repeat.
    joined = text_of(await retry())
    assert "no second request was made" in joined
    assert f"an identical call (reference {first_reference}) was already asked for" in joined

    # Another principal's identical call is not the same call.
    bobs = (await principals(http)["bob"].call_tool("wire_transfer", arguments, meta=NO_TASKS)).result
    await assert_nothing_said(http, notified, text_of(bobs), (await pending_of(http, "bob", arguments))["id"])
