"""The audit log's hash chain: ``mcp-approval audit verify`` on untouched and tampered databases,
concurrent writers extending one chain, and ``audit export``'s filters."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from typing import Any

import pytest
from sqlalchemy import Connection, select, text
from typer.testing import CliRunner

from mcp_approval.cli.main import app
from mcp_approval.clock import ManualClock
from mcp_approval.storage import AUDIT_MIGRATIONS, AuditLog, Database, migrate, open_database
from mcp_approval.storage.audit import GENESIS_HASH, audit_events_table, event_hash
from tests.support.audit import on_audit_store as _with_database

runner = CliRunner()

#: (kind, subject, actor, data) of the events every test starts from, in order.
EVENTS = [
    ("approval.submitted", "req-1", "alice", {"tool": "transfer", "template": "payments"}),
    ("approval.decision", "req-1", "bob", {"decision": "approve"}),
    ("approval.approved", "req-1", "bob", {}),
    ("approval.submitted", "req-2", "carol", {"tool": "refund", "template": "refunds"}),
    ("approval.denied", "req-2", "bob", {}),
    ("approval.submitted", "req-3", "alice", {"tool": "transfer", "template": "payments"}),
]


def _seed(url: str) -> list[int]:
    """Record :data:`EVENTS` one minute apart; the event ids, in chain order."""

    async def seed(database: Database) -> list[int]:
        clock = ManualClock(1_700_000_000_000)
        log = AuditLog(database, clock)
        for kind, subject, actor, data in EVENTS:
            await log.record(kind, subject=subject, actor=actor, data=data)
            clock.advance(60_000)
        return [event.event_id for event in await log.events()]

    return _with_database(url, seed)


def _sql(url: str, *statements: tuple[str, dict[str, Any]]) -> None:
    async def run(database: Database) -> None:
        def execute(conn: Connection) -> None:
            for statement, parameters in statements:
                conn.execute(text(statement), parameters)

        await database.write(execute)

    _with_database(url, run)


def _verify(url: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, ["audit", "verify", "--db", url, "--json"])
    return result.exit_code, json.loads(result.stdout)


def test_verify_passes_on_an_untouched_database(db_url: str) -> None:
    _seed(db_url)
    result = runner.invoke(app, ["audit", "verify", "--db", db_url])
    assert result.exit_code == 0, result.output
    assert "audit chain intact: 6 events, head 6 " in result.stdout
    code, found = _verify(db_url)
    assert (code, found["ok"], found["checked"], found["broken"]) == (0, True, 6, None)


def test_verify_names_an_edited_event(db_url: str) -> None:
    ids = _seed(db_url)
    _sql(db_url, ("UPDATE audit_events SET actor = 'mallory' WHERE event_id = :id", {"id": ids[2]}))
    result = runner.invoke(app, ["audit", "verify", "--db", db_url])
    assert result.exit_code == 1
    assert f"audit chain broken at event {ids[2]} (position 3)" in result.stdout
    assert "it was edited" in result.stdout
    assert "2 events before it are intact" in result.stdout


def test_verify_names_the_event_after_a_forged_insertion(db_url: str) -> None:
    """The forger knows the hash: the inserted event links to its predecessor, but its successor
    still commits to the predecessor, so the chain breaks right after the insertion."""
    ids = _seed(db_url)

    def forge(conn: Connection) -> None:
        rows = conn.execute(select(audit_events_table).order_by(audit_events_table.c.seq)).mappings().all()
        for row in reversed(rows[2:]):  # make room at position 3, one row at a time (seq is unique)
            conn.execute(text("UPDATE audit_events SET seq = seq + 1 WHERE event_id = :id"), {"id": row["event_id"]})
        forged = {"at": rows[1]["at"] + 1, "kind": "approval.approved", "subject": "req-2", "actor": "mallory"}
        event_id = max(ids) + 1
        digest = event_hash(seq=3, prev_hash=rows[1]["hash"], event_id=event_id, data={}, **forged)
        conn.execute(
            audit_events_table.insert().values(
                event_id=event_id, seq=3, prev_hash=rows[1]["hash"], hash=digest, data_json="{}", **forged
            )
        )
        conn.execute(text("UPDATE audit_chain_head SET seq = seq + 1"))

    _with_database(db_url, lambda database: database.write(forge))
    code, found = _verify(db_url)
    assert code == 1
    assert found["broken"]["event_id"] == ids[2]
    assert found["checked"] == 3  # the two genuine events and the forged one link up


def test_an_event_inserted_outside_the_log_is_linked_like_an_appended_forgery(db_url: str) -> None:
    """Requests insert their events unlinked, so a row inserted by hand is linked like theirs.

    That is the append anyone who can write the database could always make by computing the
    link themselves (:func:`_append_forged`): the chain proves what came before an anchor, not
    who wrote the tail. The execution rules still name an execution inserted this way.
    """
    ids = _seed(db_url)
    _, anchored = _verify(db_url)
    insert = (
        "INSERT INTO audit_events (event_id, at, kind, subject, actor, data_json) "
        "VALUES (:id, 1, :kind, 'req-3', 'mallory', :data)"
    )
    _sql(db_url, (insert, {"id": max(ids) + 1, "kind": "approval.approved", "data": "{}"}))
    code, found = _verify(db_url)
    assert (code, found["checked"], found["head_seq"]) == (0, 7, 7)
    anchor = f"{anchored['head_seq']}:{anchored['head_hash']}"
    assert runner.invoke(app, ["audit", "verify", "--db", db_url, "--anchor", anchor]).exit_code == 0
    execution = '{"backend":"local","request":"req-3"}'
    _sql(db_url, (insert, {"id": max(ids) + 2, "kind": "approval.execution_claimed", "data": execution}))
    code, found = _verify(db_url)
    assert (code, found["broken"]["event_id"], found["broken"]["seq"]) == (1, max(ids) + 2, 8)
    assert "but 0 were recorded before this execution" in found["broken"]["reason"]


@pytest.mark.parametrize("stored", ['{"decision":"approve"', '["approve"]'], ids=["not-json", "not-an-object"])
def test_an_unlinked_row_whose_data_is_not_an_object_is_linked_and_named(db_url: str, stored: str) -> None:
    """The linker does not stall on a row written outside the log: it links it, verify names it."""
    _seed(db_url)
    _sql(
        db_url,
        (
            "INSERT INTO audit_events (at, kind, subject, actor, data_json) "
            "VALUES (1, 'approval.approved', 'req-2', 'mallory', :data)",
            {"data": stored},
        ),
    )
    _seed_events(db_url, EVENTS)  # linked after it
    code, found = _verify(db_url)
    assert (code, found["head_seq"], found["checked"], found["broken"]["seq"]) == (1, 13, 6, 7)
    assert "it was edited" in found["broken"]["reason"]


def test_verify_names_an_event_stored_past_the_head(db_url: str) -> None:
    ids = _seed(db_url)
    _sql(
        db_url,
        (
            "INSERT INTO audit_events (event_id, at, kind, subject, actor, data_json, seq, prev_hash, hash) "
            "VALUES (:id, 1, 'approval.approved', 'req-2', 'mallory', '{}', 99, :h, :h)",
            {"id": max(ids) + 1, "h": "f" * 64},
        ),
    )
    code, found = _verify(db_url)
    assert (code, found["checked"], found["broken"]["event_id"]) == (1, 6, max(ids) + 1)
    assert "past the chain's head" in found["broken"]["reason"]


def test_verify_names_the_event_after_a_deleted_one(db_url: str) -> None:
    ids = _seed(db_url)
    _sql(db_url, ("DELETE FROM audit_events WHERE event_id = :id", {"id": ids[2]}))
    result = runner.invoke(app, ["audit", "verify", "--db", db_url])
    assert result.exit_code == 1
    assert f"audit chain broken at event {ids[3]} (position 4): position 3 is missing" in result.stdout


def test_verify_notices_a_deleted_tail(db_url: str) -> None:
    ids = _seed(db_url)
    _sql(db_url, ("DELETE FROM audit_events WHERE event_id IN (:a, :b)", {"a": ids[4], "b": ids[5]}))
    code, found = _verify(db_url)
    assert code == 1
    assert found["broken"] == {
        "event_id": None,
        "seq": 5,
        "reason": "the head records 6 events but the chain ends at 4: its tail was deleted",
    }


def test_concurrent_writers_extend_one_chain(db_url: str) -> None:
    """Two independent connections pools write at once; some transactions hold several events,
    some roll back after recording one. Every committed event is linked exactly once."""

    class Refused(Exception):
        pass

    async def write_all() -> tuple[int, list[int | None]]:
        first, second = open_database(db_url), open_database(db_url)
        try:
            await migrate(first, AUDIT_MIGRATIONS)
            databases = [first, second]
            logs = [AuditLog(first), AuditLog(second)]

            async def pair(writer: int, n: int) -> None:
                log = logs[writer]

                def two(conn: Connection) -> None:
                    log.record_in(conn, n, "pair.first", subject=f"w{writer}-{n}")
                    log.record_in(conn, n, "pair.second", subject=f"w{writer}-{n}")

                await databases[writer].write(two)

            async def refused(writer: int, n: int) -> None:
                def record_then_fail(conn: Connection) -> None:
                    logs[writer].record_in(conn, n, "refused", subject=f"w{writer}-{n}")
                    raise Refused

                with pytest.raises(Refused):
                    await databases[writer].write(record_then_fail)

            jobs: list[Awaitable[None]] = []
            for n in range(30):
                for writer in (0, 1):
                    jobs.append(logs[writer].record(f"single.{writer}", subject=f"w{writer}-{n}"))
                    jobs.append(pair(writer, n))
                    if n % 5 == 0:
                        jobs.append(refused(writer, n))
            await asyncio.gather(*jobs)
            found = await logs[0].verify()
            assert found.ok, found.broken
            seqs = await first.read(
                lambda conn: list(conn.execute(select(audit_events_table.c.seq).order_by(audit_events_table.c.seq)))
            )
            return found.checked, [row[0] for row in seqs]
        finally:
            await first.close()
            await second.close()

    checked, seqs = asyncio.run(write_all())
    assert checked == 2 * 30 * 3
    assert seqs == list(range(1, checked + 1))
    code, found = _verify(db_url)
    assert (code, found["checked"]) == (0, checked)


def _export(db_url: str, *options: str) -> list[dict[str, Any]]:
    result = runner.invoke(app, ["audit", "export", "--db", db_url, *options])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_export_writes_the_chain_as_json_lines_a_reader_can_check(db_url: str) -> None:
    _seed(db_url)
    lines = _export(db_url)
    assert [(line["kind"], line["subject"], line["actor"], line["data"]) for line in lines] == [
        (kind, subject, actor, data) for kind, subject, actor, data in EVENTS
    ]
    previous = GENESIS_HASH
    for seq, line in enumerate(lines, start=1):
        fields = {key: line[key] for key in ("event_id", "at", "kind", "subject", "actor", "data")}
        assert (line["seq"], line["prev_hash"]) == (seq, previous)
        assert line["hash"] == event_hash(seq=seq, prev_hash=previous, **fields)
        previous = line["hash"]


def test_export_filters_by_request_principal_tool_and_time(db_url: str) -> None:
    _seed(db_url)
    start = 1_700_000_000_000

    def kinds(*options: str) -> list[tuple[str, str]]:
        return [(line["kind"], line["subject"]) for line in _export(db_url, *options)]

    assert kinds("--request", "req-2") == [("approval.submitted", "req-2"), ("approval.denied", "req-2")]
    assert kinds("--principal", "alice") == [("approval.submitted", "req-1"), ("approval.submitted", "req-3")]
    assert kinds("--tool", "refund") == [("approval.submitted", "req-2"), ("approval.denied", "req-2")]
    assert kinds("--tool", "transfer", "--principal", "bob") == [
        ("approval.decision", "req-1"),
        ("approval.approved", "req-1"),
    ]
    assert kinds("--since", str(start + 60_000), "--until", str(start + 180_000)) == [
        ("approval.decision", "req-1"),
        ("approval.approved", "req-1"),
    ]
    assert kinds("--since", "2023-11-14T22:17:20+00:00") == [(k, s) for k, s, _, _ in EVENTS[4:]]


def test_export_refuses_a_time_it_cannot_read(db_url: str) -> None:
    result = runner.invoke(app, ["audit", "export", "--db", db_url, "--since", "yesterday"], env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert "'yesterday' is neither an ISO 8601 time nor epoch milliseconds" in result.output


def test_audit_commands_need_a_store() -> None:
    result = runner.invoke(app, ["audit", "verify"])
    assert result.exit_code == 2
    assert "give --config FILE (a deployment file) or --db URL" in result.output


def test_a_rewritten_tail_passes_alone_but_not_against_an_anchored_head(db_url: str) -> None:
    """Whoever can write the database can recompute every hash after a change: the chain alone
    cannot tell. A head kept elsewhere can."""
    ids = _seed(db_url)
    _, anchored = _verify(db_url)

    def rewrite(conn: Connection) -> None:
        conn.execute(text("UPDATE audit_events SET actor = 'mallory' WHERE event_id = :id"), {"id": ids[2]})
        rows = conn.execute(select(audit_events_table).order_by(audit_events_table.c.seq)).mappings().all()
        previous = rows[1]["hash"]
        for row in rows[2:]:
            fields = {key: row[key] for key in ("event_id", "at", "kind", "subject", "actor")}
            digest = event_hash(seq=row["seq"], prev_hash=previous, data=json.loads(row["data_json"]), **fields)
            conn.execute(
                text("UPDATE audit_events SET prev_hash = :p, hash = :h WHERE event_id = :id"),
                {"p": previous, "h": digest, "id": row["event_id"]},
            )
            previous = digest
        conn.execute(text("UPDATE audit_chain_head SET hash = :h"), {"h": previous})

    _with_database(db_url, lambda database: database.write(rewrite))
    assert _verify(db_url)[0] == 0
    anchor = f"{anchored['head_seq']}:{anchored['head_hash']}"
    result = runner.invoke(app, ["audit", "verify", "--db", db_url, "--anchor", anchor, "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["broken"] == {
        "event_id": ids[5],
        "seq": 6,
        "reason": "its hash is not the anchored one: the chain was rewritten at or before this event",
    }


def test_an_anchor_beyond_a_shortened_chain_is_a_break(db_url: str) -> None:
    ids = _seed(db_url)
    _, anchored = _verify(db_url)
    _sql(
        db_url,
        ("DELETE FROM audit_events WHERE event_id = :id", {"id": ids[5]}),
        ("UPDATE audit_chain_head SET seq = 5, hash = (SELECT hash FROM audit_events WHERE seq = 5)", {}),
    )
    assert _verify(db_url)[0] == 0
    anchor = f"6:{anchored['head_hash']}"
    result = runner.invoke(app, ["audit", "verify", "--db", db_url, "--anchor", anchor, "--json"])
    assert result.exit_code == 1
    assert "before the anchored position 6" in json.loads(result.stdout)["broken"]["reason"]


def test_verify_refuses_an_anchor_it_cannot_read(db_url: str) -> None:
    result = runner.invoke(app, ["audit", "verify", "--db", db_url, "--anchor", "6:xyz"], env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert "'6:xyz' is not SEQ:HASH" in result.output


@pytest.mark.parametrize(
    ("stored", "reason"),
    [
        # json.loads reads the last value, so the hash still matches; SQL's json_extract reads the first.
        ('{"decision":"FORGED","decision":"approve"}', "names the key 'decision' twice"),
        ('{"decision": "approve"}', "not stored as canonical JSON"),
        ('{"decision":"approve"', "not JSON"),
        ('["approve"]', "not a JSON object"),
    ],
    ids=["duplicate-key", "non-canonical", "not-json", "not-an-object"],
)
def test_verify_refuses_data_that_is_not_the_canonical_text_it_was_written_as(
    db_url: str, stored: str, reason: str
) -> None:
    ids = _seed(db_url)
    _sql(db_url, ("UPDATE audit_events SET data_json = :data WHERE event_id = :id", {"data": stored, "id": ids[1]}))
    result = runner.invoke(app, ["audit", "verify", "--db", db_url])
    assert result.exit_code == 1, result.output
    assert f"audit chain broken at event {ids[1]} (position 2)" in result.stdout
    assert reason in result.stdout


#: A local request of alice's needing two approvals, decided by bob and carol, then run.
RULED = [
    ("approval.submitted", "req-9", "alice", {"tool": "transfer", "approvals_required": 2, "self_approval": False}),
    ("approval.decision", "req-9", "bob", {"decision": "approve"}),
    ("approval.decision", "req-9", "carol", {"decision": "approve"}),
    ("approval.approved", "req-9", "carol", {}),
    ("approval.execution_claimed", "task-9", None, {"backend": "local", "request": "req-9"}),
    ("approval.execution_finished", "task-9", None, {"backend": "local", "request": "req-9"}),
]


def _seed_events(url: str, events: list[tuple[str, str, str | None, dict[str, Any]]]) -> None:
    async def seed(database: Database) -> None:
        log = AuditLog(database, ManualClock(1_700_000_000_000))
        for kind, subject, actor, data in events:
            await log.record(kind, subject=subject, actor=actor, data=data)
        await log.link()  # as the server's linker would, before anyone appends a forgery

    _with_database(url, seed)


def _append_forged(url: str, kind: str, subject: str, data: dict[str, Any]) -> int:
    """Append an event as someone who can write the database would: linked, hashed, the head moved."""

    def forge(conn: Connection) -> int:
        seq, head = conn.execute(text("SELECT seq, hash FROM audit_chain_head")).one()
        event_id = int(conn.execute(text("SELECT MAX(event_id) FROM audit_events")).scalar_one()) + 1
        fields = {"event_id": event_id, "at": 1_700_000_900_000, "kind": kind, "subject": subject, "actor": None}
        digest = event_hash(seq=seq + 1, prev_hash=head, data=data, **fields)
        data_json = json.dumps(data, separators=(",", ":"), sort_keys=True)
        conn.execute(
            audit_events_table.insert().values(seq=seq + 1, prev_hash=head, hash=digest, data_json=data_json, **fields)
        )
        conn.execute(text("UPDATE audit_chain_head SET seq = :s, hash = :h"), {"s": seq + 1, "h": digest})
        return event_id

    return _with_database(url, lambda database: database.write(forge))


def test_verify_accepts_executions_their_decisions_allow(db_url: str) -> None:
    _seed_events(db_url, RULED)
    code, found = _verify(db_url)
    assert (code, found["ok"], found["checked"]) == (0, True, len(RULED))


@pytest.mark.parametrize(
    ("events", "reason"),
    [
        # A pending request: submitted, nobody decided.
        (RULED[:1], "needed 2 approval(s) from reviewers other than its requester, but 0 were recorded"),
        # One of the two approvals.
        (RULED[:2], "needed 2 approval(s) from reviewers other than its requester, but 1 were recorded"),
        # The second "approval" is the requester's own.
        (
            [*RULED[:2], ("approval.decision", "req-9", "alice", {"decision": "approve"})],
            "but 1 were recorded before this execution",
        ),
        # A denial first.
        ([RULED[0], ("approval.decision", "req-9", "bob", {"decision": "deny"})], "was denied by bob"),
        # No request at all.
        ([], "was never submitted"),
    ],
    ids=["no-decision", "one-of-two", "self-approval", "denied", "never-submitted"],
)
def test_verify_names_an_execution_inserted_without_the_decisions_it_needed(
    db_url: str, events: list[tuple[str, str, str | None, dict[str, Any]]], reason: str
) -> None:
    """The forger links the execution event and moves the head: the chain holds, the rules do not."""
    _seed_events(db_url, [*EVENTS, *events])
    forged = _append_forged(db_url, "approval.execution_claimed", "task-9", {"backend": "local", "request": "req-9"})
    result = runner.invoke(app, ["audit", "verify", "--db", db_url])
    assert result.exit_code == 1, result.output
    assert f"audit chain broken at event {forged}" in result.stdout
    assert reason in result.stdout


def test_verify_counts_the_requesters_own_approval_where_its_rules_allow_it(db_url: str) -> None:
    submitted = ("approval.submitted", "req-9", "alice", {"approvals_required": 1, "self_approval": True})
    own = ("approval.decision", "req-9", "alice", {"decision": "approve"})
    _seed_events(db_url, [submitted, own, RULED[4]])
    assert _verify(db_url)[0] == 0


def test_executions_of_a_remote_backend_are_not_checked_here(db_url: str) -> None:
    """An ARAP service keeps its requests' decisions itself; this log holds none of them."""
    _seed_events(db_url, [("approval.execution_claimed", "task-1", None, {"backend": "arap", "request": "r"})])
    assert _verify(db_url)[0] == 0


@pytest.mark.parametrize(
    ("anchor", "message"),
    [
        ('{"seq": "6", "hash": "00"}', "is not an anchor: a JSON object with seq"),
        ('{"seq": 6', "is not an anchor"),
        ("no-such-anchors.jsonl", "is not SEQ:HASH (a position and 64 hex digits), an anchor line or an anchor file"),
    ],
    ids=["wrong-members", "not-json", "no-file"],
)
def test_verify_refuses_an_anchor_line_it_cannot_read(db_url: str, anchor: str, message: str) -> None:
    result = runner.invoke(app, ["audit", "verify", "--db", db_url, "--anchor", anchor], env={"COLUMNS": "300"})
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_verify_names_an_execution_of_another_call_than_its_request_was_submitted_for(db_url: str) -> None:
    """A task pointed at another call's approved request (its link swapped): the digests disagree."""
    submitted = ("approval.submitted", "req-9", "alice", {**RULED[0][3], "call_digest": "b" * 64})
    _seed_events(db_url, [*EVENTS, submitted, *RULED[1:4]])
    data = {"backend": "local", "request": "req-9", "call_digest": "a" * 64}
    forged = _append_forged(db_url, "approval.execution_claimed", "task-9", data)
    result = runner.invoke(app, ["audit", "verify", "--db", db_url])
    assert result.exit_code == 1, result.output
    assert f"audit chain broken at event {forged}" in result.stdout
    assert "was submitted for another call than the one this execution ran" in result.stdout
