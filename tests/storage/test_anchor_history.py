"""``mcp-approval audit verify --anchor FILE`` checks every anchor of the file, not only its last line.

Each test writes anchors as ``[audit.anchor]`` does, between batches of events, then writes the
database the way someone with write access to it would (a tail deleted with the head moved back,
the chain wiped, the tail rewritten with its hashes recomputed) and appends the anchor an
anchorer without checks would have written next (the tampered head). The file's last line then
holds, so reading only that line finds nothing; every finding must name its line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import text
from typer.testing import CliRunner, Result

from mcp_approval.cli.main import app
from mcp_approval.clock import ManualClock
from mcp_approval.notify.anchors import anchor_line
from mcp_approval.storage import AuditLog, Database
from mcp_approval.storage.audit import GENESIS_HASH
from tests.support.audit import on_audit_store, rewrite_from

runner = CliRunner()


def record(url: str, count: int, subject: str = "req-1") -> tuple[int, str]:
    """Record ``count`` events about ``subject``; the head after them, as an anchor takes it."""

    async def run(database: Database) -> tuple[int, str]:
        log = AuditLog(database, ManualClock(1_700_000_000_000))
        for number in range(count):
            await log.record("approval.submitted", subject=f"{subject}-{number}", actor="alice", data={"n": number})
        return await log.head()

    return on_audit_store(url, run)


def sql(url: str, *statements: str) -> None:
    async def run(database: Database) -> None:
        await database.write(lambda conn: [conn.execute(text(statement)) for statement in statements])

    on_audit_store(url, run)


def rewrite(url: str, seq: int) -> None:
    """The event at ``seq`` edited and every hash after it recomputed (:func:`rewrite_from`)."""
    on_audit_store(url, lambda database: database.write(lambda conn: rewrite_from(conn, seq)))


def write_anchors(path: Path, *heads: tuple[int, str]) -> Path:
    path.write_text("".join(anchor_line(seq, digest, 1_700_000_000_000 + seq) + "\n" for seq, digest in heads))
    return path


def verify(url: str, anchors: Path, *options: str) -> Result:
    return runner.invoke(app, ["audit", "verify", "--db", url, "--anchor", str(anchors), *options])


def verify_json(url: str, anchors: Path) -> tuple[int, dict[str, Any]]:
    result = verify(url, anchors, "--json")
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def findings(url: str, anchors: Path) -> list[tuple[int, str]]:
    """``(line, reason)`` of every finding ``verify --anchor FILE --json`` reports."""
    code, found = verify_json(url, anchors)
    assert code == 1, found
    return [(item["line"], item["reason"]) for item in found["anchors"]["findings"]]


def test_an_intact_history_passes_and_says_how_many_anchors_hold(db_url: str, tmp_path: Path) -> None:
    first = record(db_url, 3)
    second = record(db_url, 4, "req-2")
    idle = second  # an anchor of a chain that did not move repeats the head
    anchors = write_anchors(tmp_path / "anchors.jsonl", (0, GENESIS_HASH), first, second, idle)
    result = verify(db_url, anchors)
    assert result.exit_code == 0, result.output
    assert f"audit chain intact: 7 events, head 7 {second[1]}; all 4 anchors of {anchors} hold" in result.stdout
    code, found = verify_json(db_url, anchors)
    assert (code, found["ok"], found["broken"]) == (0, True, None)
    assert found["anchors"] == {"file": str(anchors), "checked": 4, "findings": []}


def test_a_deleted_tail_anchored_afterwards_fails_at_both_lines(db_url: str, tmp_path: Path) -> None:
    """The finding of issue 36: the tail deleted and the head moved back; the next anchor records that head."""
    kept = record(db_url, 4)
    lost = record(db_url, 3, "req-2")
    sql(
        db_url,
        f"DELETE FROM audit_events WHERE seq > {kept[0]}",
        f"UPDATE audit_chain_head SET seq = {kept[0]}, hash = '{kept[1]}'",
    )
    anchors = write_anchors(tmp_path / "anchors.jsonl", kept, lost, kept)
    assert verify(db_url, tmp_path / "anchors.jsonl").exit_code == 1
    assert runner.invoke(app, ["audit", "verify", "--db", db_url, "--anchor", f"{kept[0]}:{kept[1]}"]).exit_code == 0
    assert findings(db_url, anchors) == [
        (2, "the chain ends at 4, before the anchored position 7: it was truncated, wiped or rewritten"),
        (3, "position 4 is before position 7 of line 2: the anchors go backwards (a head anchored after the chain "
         "lost events, or lines moved)"),
    ]  # fmt: skip


def test_a_wiped_chain_anchored_afterwards_fails_and_the_text_names_each_line(db_url: str, tmp_path: Path) -> None:
    """The finding of issue 36: "intact (14 events, then 0)"."""
    head = record(db_url, 14)
    sql(db_url, "DELETE FROM audit_events", "DELETE FROM audit_chain_head")
    anchors = write_anchors(tmp_path / "anchors.jsonl", head, (0, GENESIS_HASH))
    result = verify(db_url, anchors)
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert lines == [
        f"audit chain broken against its anchors: 2 of the 2 anchors of {anchors} do not hold (the chain alone "
        f"holds 0 events, head 0 {GENESIS_HASH})",
        f"{anchors} line 1: the chain ends at 0, before the anchored position 14: it was truncated, wiped or rewritten",
        f"{anchors} line 2: position 0 is before position 14 of line 1: the anchors go backwards (a head "
        "anchored after the chain lost events, or lines moved)",
    ]
    _, found = verify_json(db_url, anchors)
    assert (found["ok"], found["checked"], found["broken"]["seq"]) == (False, 0, 14)
    assert found["broken"]["reason"].startswith(f"{anchors} line 1: the chain ends at 0")


def test_a_tail_rewritten_with_recomputed_hashes_fails_at_every_anchor_it_covers(db_url: str, tmp_path: Path) -> None:
    early = record(db_url, 2)
    middle = record(db_url, 3, "req-2")
    late = record(db_url, 2, "req-3")
    rewrite(db_url, 4)
    rewritten = on_audit_store(db_url, lambda database: AuditLog(database).head())
    assert rewritten[0] == late[0]
    assert rewritten[1] != late[1]
    assert runner.invoke(app, ["audit", "verify", "--db", db_url]).exit_code == 0  # the chain alone holds
    anchors = write_anchors(tmp_path / "anchors.jsonl", early, middle, late, rewritten)
    found = findings(db_url, anchors)
    stored = dict(on_audit_store(db_url, lambda database: AuditLog(database).hashes_at([5, 7])))
    assert found == [
        (2, f"the event at position 5 (event {stored[5][0]}) has hash {stored[5][1][:16]}..., not the anchored "
         f"{middle[1][:16]}...: the chain was rewritten at or before it"),
        (3, f"the event at position 7 (event {stored[7][0]}) has hash {stored[7][1][:16]}..., not the anchored "
         f"{late[1][:16]}...: the chain was rewritten at or before it"),
    ]  # fmt: skip


def test_lines_that_go_backwards_fail_even_when_each_anchor_holds(db_url: str, tmp_path: Path) -> None:
    first = record(db_url, 3)
    second = record(db_url, 3, "req-2")
    anchors = write_anchors(tmp_path / "anchors.jsonl", first, second, first)
    assert findings(db_url, anchors) == [
        (3, "position 3 is before position 6 of line 2: the anchors go backwards (a head anchored after the chain "
         "lost events, or lines moved)"),
    ]  # fmt: skip


def test_edited_and_unreadable_lines_are_findings_naming_their_line(db_url: str, tmp_path: Path) -> None:
    first = record(db_url, 3)
    second = record(db_url, 3, "req-2")
    anchors = tmp_path / "anchors.jsonl"
    good = [json.loads(anchor_line(*head, 1_700_000_000_000)) for head in (first, second)]
    lines = [
        json.dumps(good[0]),
        json.dumps({**good[1], "count": 2}),  # count edited: below line 1's and not its position
        "{not json",
        json.dumps({"kind": "audit.anchor.alert", "problem": "chain", "reason": "the chain ends at 0"}),
        json.dumps(good[1]),
    ]
    anchors.write_text("\n".join(lines) + "\n\n")
    assert findings(db_url, anchors) == [
        (2, "its count 2 is not its position 6: the line was edited"),
        (2, "count 2 is below count 3 of line 1: the anchors go backwards"),
        (3, "it is not an anchor: a JSON object with seq (a position) and hash (64 hex digits)"),
        (4, "it is an alert, not an anchor: the chain ends at 0"),
    ]


def test_an_empty_anchor_file_cannot_be_checked(db_url: str, tmp_path: Path) -> None:
    record(db_url, 1)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    result = runner.invoke(app, ["audit", "verify", "--db", db_url, "--anchor", str(empty)], env={"COLUMNS": "300"})
    assert result.exit_code == 2
    assert "holds no anchor" in result.output
