"""``[audit.anchor]``: a ``serve`` process writes the audit chain's head to a file while it runs and when it
stops; ``audit verify --anchor FILE`` then detects a deleted tail and a wiped table, which the chain
alone (head moved, or gone with the events) takes for intact."""

from __future__ import annotations

import asyncio
import json
import signal
import tomllib
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from typer.testing import CliRunner, Result

from mcp_approval.cli.main import app
from mcp_approval.config import ConfigError, load_config
from mcp_approval.storage import open_database
from tests.support.polling import eventually
from tests.support.receivers import WEBHOOK_SECRET, SmtpReceiver, WebhookReceiver
from tests.support.timing import scaled
from tests.support.treasury import Reviewer, TreasuryServer, deployment_dir, principals
from tests.treasury.helpers import approval_for

pytestmark = pytest.mark.anyio
runner = CliRunner()

ANCHORS = {"audit": {"anchor": {"interval_s": 0.2, "file": "anchors.jsonl"}}}


def anchors(directory: Path) -> list[dict[str, Any]]:
    path = directory / "anchors.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def verify(db_url: str, *options: str) -> tuple[int, dict[str, Any]]:
    result = await invoke("audit", "verify", "--db", db_url, "--json", *options)
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


async def invoke(*arguments: str) -> Result:
    """The CLI, in a thread: it runs its own event loop."""
    return await asyncio.to_thread(runner.invoke, app, list(arguments))


async def sql(db_url: str, *statements: str) -> None:
    database = open_database(db_url)
    try:
        await database.write(lambda conn: [conn.execute(text(statement)) for statement in statements])
    finally:
        await database.close()


async def run_and_stop(directory: Path, db_url: str) -> None:
    """Serve, make a few audited steps (two requests, one denied), then stop the server gracefully."""
    server = TreasuryServer(directory, db_url=db_url).start()
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=scaled(20)) as http:
            await transfers(http, "acct-anchor-1", "acct-anchor-2")
            carol = Reviewer(http, "carol-token")
            approval = await approval_for(carol, "wire_transfer", to="acct-anchor-1")
            assert (await carol.decide(approval["id"], "deny")).status_code == 200
        await eventually(lambda: _anchors_async(directory), lambda found: bool(found) and found[-1]["seq"] >= 6)
    finally:
        stop_gracefully(server)


def stop_gracefully(server: TreasuryServer) -> None:
    """SIGTERM: uvicorn shuts down gracefully (the lifespan's finally runs, the last anchor is written),
    then re-raises the SIGTERM it caught."""
    assert server.process is not None
    server.process.send_signal(signal.SIGTERM)
    assert server.wait_exit() in (0, -signal.SIGTERM), server.log()[-3000:]


async def transfers(http: httpx.AsyncClient, *accounts: str) -> None:
    """alice's gated transfers to ``accounts``: each opens a request."""
    alice = principals(http)["alice"]
    for account in accounts:
        await alice.call_tool("wire_transfer", {"to": account, "amount": 30_000})


async def _anchors_async(directory: Path) -> list[dict[str, Any]]:
    return anchors(directory)


async def test_serve_anchors_the_head_while_running_and_when_it_stops(tmp_path: Path, db_url: str) -> None:
    directory = deployment_dir(tmp_path, ANCHORS)
    await run_and_stop(directory, db_url)
    written = anchors(directory)
    code, found = await verify(db_url)
    assert code == 0
    # The last anchor is the one written at shutdown: the head after every event of the process.
    assert (written[-1]["seq"], written[-1]["hash"], written[-1]["count"]) == (
        found["head_seq"],
        found["head_hash"],
        found["head_seq"],
    )
    assert [line["kind"] for line in written] == ["audit.anchor"] * len(written)
    assert [line["at"] for line in written] == sorted(line["at"] for line in written)
    assert (await verify(db_url, "--anchor", str(directory / "anchors.jsonl")))[0] == 0
    assert (await verify(db_url, "--anchor", (directory / "anchors.jsonl").read_text().splitlines()[-1]))[0] == 0


async def test_a_deleted_tail_with_the_head_moved_is_detected_by_the_anchor_file(tmp_path: Path, db_url: str) -> None:
    directory = deployment_dir(tmp_path, ANCHORS)
    await run_and_stop(directory, db_url)
    head = anchors(directory)[-1]["seq"]
    await sql(
        db_url,
        f"DELETE FROM audit_events WHERE seq > {head - 2} OR seq IS NULL",  # with any event not yet linked
        f"UPDATE audit_chain_head SET seq = {head - 2}, hash = (SELECT hash FROM audit_events WHERE seq = {head - 2})",
    )
    assert (await verify(db_url))[0] == 0  # the chain alone holds
    code, found = await verify(db_url, "--anchor", str(directory / "anchors.jsonl"))
    assert code == 1
    cut = [number for number, line in enumerate(anchors(directory), start=1) if line["seq"] > head - 2]
    assert [finding["line"] for finding in found["anchors"]["findings"]] == cut
    assert (
        f"the chain ends at {head - 2}, before the anchored position {head}"
        in found["anchors"]["findings"][-1]["reason"]
    )


async def test_a_wiped_audit_table_is_detected_by_the_anchor_file(tmp_path: Path, db_url: str) -> None:
    directory = deployment_dir(tmp_path, ANCHORS)
    await run_and_stop(directory, db_url)
    head = anchors(directory)[-1]["seq"]
    await sql(db_url, "DELETE FROM audit_events", "DELETE FROM audit_chain_head")
    code, found = await verify(db_url)
    assert (code, found["checked"]) == (0, 0)  # without an anchor: "intact: 0 events"
    result = await invoke("audit", "verify", "--db", db_url, "--anchor", str(directory / "anchors.jsonl"))
    assert result.exit_code == 1, result.output
    assert f"the chain ends at 0, before the anchored position {head}: it was truncated, wiped" in result.stdout


async def test_anchors_go_to_a_signed_webhook_too(tmp_path: Path, db_url: str) -> None:
    receiver = WebhookReceiver().start()
    try:
        webhook = {"url": receiver.url, "secret": WEBHOOK_SECRET}
        directory = deployment_dir(tmp_path, {"audit": {"anchor": {**ANCHORS["audit"]["anchor"], "webhook": webhook}}})
        await run_and_stop(directory, db_url)
    finally:
        receiver.stop()
    posted = receiver.all()
    assert posted
    assert all(delivery.verified and delivery.accepted for delivery in posted)
    # Each anchor went to both places, in the same order, as the same line.
    lines = (directory / "anchors.jsonl").read_text().splitlines()
    assert [delivery.body.decode() for delivery in posted] == lines
    assert len({delivery.webhook_id for delivery in posted}) == len(posted)
    assert (await verify(db_url, "--anchor", posted[-1].body.decode()))[0] == 0
    saved = directory / "webhook-messages.jsonl"  # as an operator keeps them: one message a line
    saved.write_text("".join(delivery.body.decode() + "\n" for delivery in posted))
    assert (await verify(db_url, "--anchor", str(saved)))[0] == 0


def test_the_documented_anchor_section_configures_a_deployment(tmp_path: Path) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "operators.md").read_text(encoding="utf-8")
    section = page[page.index("### Anchors") :]
    start = section.index("```toml\n") + len("```toml\n")
    documented = tomllib.loads(section[start : section.index("```", start)])
    config = load_config(deployment_dir(tmp_path, documented) / "config.toml")
    anchor = config.audit.anchor
    assert anchor is not None
    assert anchor.interval_s == 300
    assert anchor.file == Path("/var/lib/mcp-approval-anchors/audit-anchors.jsonl")
    assert anchor.webhook is not None
    assert anchor.webhook.url == "https://anchors.example.com/mcp-approval"


def test_an_anchor_section_without_a_destination_is_refused(tmp_path: Path) -> None:
    directory = deployment_dir(tmp_path, {"audit": {"anchor": {"interval_s": 60.0}}})
    with pytest.raises(ConfigError, match="an anchor needs a file, a webhook or a notification channel"):
        load_config(directory / "config.toml")


async def test_anchors_go_to_notification_channels_as_messages_verify_accepts(tmp_path: Path, db_url: str) -> None:
    """An e-mail channel (Apprise, to a real SMTP server on 127.0.0.1) and a webhook channel: each anchor
    arrives as a message whose text is the anchor line, and ``verify --anchor`` takes that text."""
    smtp, hook = SmtpReceiver().start(), WebhookReceiver().start()
    try:
        channels = {
            "auditors": {"kind": "apprise", "urls": [smtp.url(to="auditors@example.com")]},
            "siem": {"kind": "webhook", "url": hook.url, "secret": WEBHOOK_SECRET},
        }
        anchor = {**ANCHORS["audit"]["anchor"], "channels": ["auditors", "siem"]}
        directory = deployment_dir(tmp_path, {"audit": {"anchor": anchor}, "notifications": {"channels": channels}})
        await run_and_stop(directory, db_url)
    finally:
        smtp.stop()
        hook.stop()
    lines = (directory / "anchors.jsonl").read_text().splitlines()
    mailed = [(subject, body.strip()) for subject, body in smtp.texts() if subject.startswith("mcp-approval audit")]
    assert [body for _, body in mailed] == lines
    assert mailed[-1][0] == f"mcp-approval audit anchor at position {json.loads(lines[-1])['seq']}"
    assert [delivery.body.decode() for delivery in hook.all()] == lines
    assert (await verify(db_url, "--anchor", mailed[-1][1]))[0] == 0


def test_an_anchor_channel_must_be_configured(tmp_path: Path) -> None:
    anchor = {"interval_s": 60.0, "channels": ["nowhere"]}
    directory = deployment_dir(tmp_path, {"audit": {"anchor": anchor}})
    with pytest.raises(ConfigError, match=r"audit.anchor.channels: no channel 'nowhere' in \[notifications.channels\]"):
        load_config(directory / "config.toml")


# -- a chain tampered with between anchors gets no anchor, but an alert ------------------------------

METRICS = {"metrics": {"enabled": True, "bearer_token": "metrics-token"}}


def head_moved_back(head: int, by: int) -> tuple[str, str]:
    """The finding of issue 36: the last ``by`` events deleted and the head moved back onto the one before them."""
    kept = head - by
    return (
        f"DELETE FROM audit_events WHERE seq > {kept} OR seq IS NULL",
        f"UPDATE audit_chain_head SET seq = {kept}, hash = (SELECT hash FROM audit_events WHERE seq = {kept})",
    )


def anchor_alerts(exposition: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in exposition.splitlines():
        if line.startswith("mcp_approval_audit_anchor_alerts_total{"):
            labels, value = line.rsplit(" ", 1)
            found[labels.split('"')[1]] = float(value)
    return found


async def test_a_tail_deleted_while_serving_gets_no_anchor_but_an_alert(tmp_path: Path, db_url: str) -> None:
    """``serve`` anchoring every 0.2 s; the tail is deleted and the head moved back: the server writes no
    anchor of that head, logs an ERROR, counts it on ``/metrics`` and tells the anchor webhook."""
    receiver = WebhookReceiver().start()
    anchor = {**ANCHORS["audit"]["anchor"], "webhook": {"url": receiver.url, "secret": WEBHOOK_SECRET}}
    directory = deployment_dir(tmp_path, {"audit": {"anchor": anchor}, **METRICS})
    server = TreasuryServer(directory, db_url=db_url).start()
    try:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=20) as http:
            await transfers(http, "acct-cut-1", "acct-cut-2")

            def idle(found: list[dict[str, Any]]) -> bool:  # two anchors of one head: nothing is being recorded
                return len(found) >= 2 and found[-1]["seq"] == found[-2]["seq"] >= 4

            head = (await eventually(lambda: _anchors_async(directory), idle))[-1]
            before = len(anchors(directory))
            await sql(db_url, *head_moved_back(head["seq"], 2))

            async def alerts() -> list[dict[str, Any]]:
                return [d.payload for d in receiver.all() if d.payload.get("kind") == "audit.anchor.alert"]

            (alert,) = await eventually(alerts, bool)
            assert alert["problem"] == "chain"
            assert f"the chain ends at {head['seq'] - 2}, before the anchored position {head['seq']}" in alert["reason"]
            scraped = await http.get("/metrics", headers={"authorization": "Bearer metrics-token"})
            assert scraped.status_code == 200, scraped.text
            assert anchor_alerts(scraped.text)["chain"] >= 1
            assert anchor_alerts(scraped.text)["history"] == 0
    finally:
        stop_gracefully(server)
        receiver.stop()
    assert "ERROR" in server.log()
    assert "audit anchor alert (chain): no anchor written" in server.log()
    # Anything written after the tamper anchors the head from before it (a write that had walked the
    # chain just before); none anchors the moved-back head, not even the last one at shutdown.
    after = anchors(directory)[before:]
    assert {(line["seq"], line["hash"]) for line in after} <= {(head["seq"], head["hash"])}
    posted = [d.payload for d in receiver.all() if d.payload.get("kind") == "audit.anchor"]
    assert max(line["seq"] for line in posted) == head["seq"]
    code, found = await verify(db_url, "--anchor", str(directory / "anchors.jsonl"))
    assert code == 1
    assert found["anchors"]["findings"]
    # The webhook's copies, saved one message per line in the order they came, are checked the same way.
    saved = directory / "webhook-messages.jsonl"
    saved.write_text("".join(delivery.body.decode() + "\n" for delivery in receiver.all()))
    code, found = await verify(db_url, "--anchor", str(saved))
    assert code == 1
    reasons = [finding["reason"] for finding in found["anchors"]["findings"]]
    assert any(reason.startswith("it is an alert, not an anchor: no anchor written") for reason in reasons)
    assert any(f"before the anchored position {head['seq']}" in reason for reason in reasons)


async def test_a_chain_wiped_while_stopped_is_refused_by_the_restarted_server(tmp_path: Path, db_url: str) -> None:
    """After a restart the anchor writer reads its previous anchor back from its file."""
    directory = deployment_dir(tmp_path, ANCHORS)
    await run_and_stop(directory, db_url)
    before = anchors(directory)
    await sql(db_url, "DELETE FROM audit_events", "DELETE FROM audit_chain_head")
    server = TreasuryServer(directory, db_url=db_url).start()
    try:
        await eventually(lambda: _log_async(server), lambda log: log.count("audit anchor alert (chain)") >= 2)
    finally:
        stop_gracefully(server)
    assert anchors(directory) == before
    result = await invoke("audit", "verify", "--db", db_url, "--anchor", str(directory / "anchors.jsonl"))
    assert result.exit_code == 1, result.output
    assert f"line {len(before)}: the chain ends at 0, before the anchored position {before[-1]['seq']}" in result.stdout


async def _log_async(server: TreasuryServer) -> str:
    return server.log()
