"""Nothing a store holds reaches the terminal raw, whichever command prints it.

Hostile text (every C0 and C1 control, DEL, CSI and OSC 0/8/52 sequences in their 7- and 8-bit
forms, the bidirectional controls U+202A-U+202E and U+2066-U+2069, a line break followed by a
fake ``carol: deny`` line, rich markup) is stored where a database writer or a caller can put it:
a request's tool, requester, template, title and arguments, a reviewer's name and comment, the
reason of an integrity failure that names a reviewer, a request id. Each command that prints it
(``review list``, ``review show``, ``review approve``/``deny`` and their errors, ``upgrade
seal-requests``, the start-up lines of ``serve`` and ``arap-server``, the tasks demo's lines) must
show all of it as visible escapes: no control character but line breaks of its own, no bidi
control, no line of the stored text's making, and rich markup printed, not obeyed. On SQLite and
PostgreSQL (which cannot store NUL: there the text goes without it).
"""

from __future__ import annotations

import asyncio
import base64
import io
import secrets
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.console import Console
from sqlalchemy import Connection, select, update
from typer.testing import CliRunner

from mcp_approval.backends import ApprovalTemplate, LocalApprovalBackend
from mcp_approval.backends.contract import ApprovalSubmission
from mcp_approval.backends.local.schema import (
    LOCAL_BACKEND_MIGRATIONS,
    approval_decisions_table,
    approval_requests_table,
)
from mcp_approval.cli.main import app
from mcp_approval.cli.tasks_demo import TasksDemoResult, _summary, print_result
from mcp_approval.keyring import binding_cipher
from mcp_approval.storage import AUDIT_MIGRATIONS, migrate, open_database
from mcp_approval.storage.migrations import Migrations
from tests.support.arap import arap_deployment
from tests.support.treasury import TreasuryServer, deployment_dir

_R, _D = approval_requests_table, approval_decisions_table

#: Every C0 control, DEL and every C1 control.
CONTROLS = "".join(map(chr, [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]))
SEQUENCES = (
    "\x1b[2J\x1b[H\x1b[1A\x1b[31m"  # CSI: clear, home, cursor up, colour
    "\x1b]0;pwned title\x07"  # OSC 0: window title
    "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"  # OSC 8: a hidden link
    "\x1b]52;c;ZXZpbA==\x07"  # OSC 52: write the clipboard
    "\x9b2J\x9d0;8-bit title\x9c"  # the 8-bit CSI and OSC
)
BIDI = "".join(map(chr, [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]))
FAKE_LINE = "ok\ncarol: deny"
MARKUP = "[bold]loud[/bold] [link=https://evil.example/]here[/link]"
#: Kept as the text's own: newline and tab are escaped by one-line fields, kept in blocks.
KEPT = {"\n"}
UNSAFE = frozenset(
    chr(code) for code in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
) - KEPT | frozenset("\u200e\u200f\u061c\u2028\u2029")


#: A reviewer's name of an attacker's making (the column holds 256 characters).
REVIEWER = f"carolH{SEQUENCES}{BIDI}{FAKE_LINE}"


def hostile(db_url: str, tag: str) -> str:
    """The hostile text, tagged (to find it), without NUL on PostgreSQL (which cannot store it)."""
    text = f"{tag}{CONTROLS}{SEQUENCES}{BIDI}{FAKE_LINE} {MARKUP}"
    return text.replace("\x00", "") if db_url.startswith("postgresql") else text


def assert_nothing_raw(output: str) -> None:
    """No control or bidi character but a line break, and no line the stored text made."""
    raw = sorted({f"U+{ord(char):04X}" for char in output if char in UNSAFE})
    assert raw == [], f"raw in the output: {raw}\n{output!r}"
    assert not any(line.lstrip().startswith("carol: deny") for line in output.splitlines()), output


def assert_shown_escaped(output: str) -> None:
    """The hostile text is there, as escapes (so the check above is not passed by printing nothing)."""
    assert "\\x1b]0;pwned title\\x07" in output or "\\u001b]0;pwned title\\u0007" in output, output
    assert "\\u202e" in output or "\\u202E" in output, output


# -- a store holding hostile text ---------------------------------------------------------------


@dataclass(frozen=True)
class Store:
    url: str
    key_file: Path
    pending: str  # hostile everything, one hostile reviewer's approval (of two needed) with a hostile comment
    to_decide: str  # hostile content, no decision yet
    text: str  # the hostile text as stored

    def args(self) -> list[str]:
        return ["--db", self.url, "--binding-key-file", str(self.key_file)]


def _key_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys.toml"
    path.write_text(f'k1 = "{base64.b64encode(secrets.token_bytes(32)).decode()}"\n')
    return path


async def _stored(db_url: str, tmp_path: Path, history: tuple[Migrations, ...]) -> Store:
    text = hostile(db_url, "H")
    key_file = _key_file(tmp_path)
    seal = binding_cipher({}, key_file=key_file)
    database = open_database(db_url)
    try:
        await migrate(database, *history)
        templates = {text: ApprovalTemplate(approvals_required=2)}
        backend = LocalApprovalBackend(
            database, templates=templates, roles=lambda principal: frozenset({"approver"}), seal=seal
        )
        body = {"tool": text, "requester": text, "template": text, "title": text, "description": text}
        pending = await backend.submit(
            secrets.token_urlsafe(16), ApprovalSubmission(arguments={text: text, "amount": 1}, **body)
        )
        await backend.decide(pending, REVIEWER, "approve", text)
        to_decide = await backend.submit(
            secrets.token_urlsafe(16), ApprovalSubmission(arguments={"note": text}, **body)
        )
    finally:
        await database.close()
    return Store(db_url, key_file, pending, to_decide, text)


@pytest.fixture
def store(db_url: str, tmp_path: Path) -> Store:
    return asyncio.run(_stored(db_url, tmp_path, (AUDIT_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS)))


runner = CliRunner()


def run(*arguments: str) -> tuple[int, str]:
    result = runner.invoke(app, list(arguments))
    return result.exit_code, result.stdout + result.stderr


# -- review --------------------------------------------------------------------------------------


def test_review_list_shows_stored_text_escaped(store: Store) -> None:
    for extra in ([], ["--json"], ["--status", "decided"]):
        code, output = run("review", "list", *store.args(), *extra)
        assert code == 0, output
        assert_nothing_raw(output)
    code, output = run("review", "list", *store.args())
    assert_shown_escaped(output)
    assert MARKUP in output  # printed as text: the command renders no markup


def test_review_show_shows_arguments_comments_and_reviewers_escaped(store: Store) -> None:
    for extra in ([], ["--json"]):
        code, output = run("review", "show", store.pending, *store.args(), *extra)
        assert code == 0, output
        assert_nothing_raw(output)
        assert_shown_escaped(output)
    code, output = run("review", "show", store.pending, *store.args())
    (decision,) = [line for line in output.splitlines() if line.startswith("decision")]
    assert decision.split(None, 1)[1].startswith("carolH\\x1b[2J\\x1b[H"), decision
    assert "ok\\ncarol: deny" in output


def test_review_approve_and_deny_answers_show_stored_text_escaped(store: Store) -> None:
    comment = store.text.replace("\x00", "")  # an argument cannot carry NUL
    code, output = run(
        "review", "approve", store.pending, *store.args(), "--as", "dave" + comment[:200], "--role", "approver",
        "--comment", comment,
    )  # fmt: skip
    assert code == 0, output
    assert_nothing_raw(output)
    assert_shown_escaped(output)
    code, output = run(
        "review", "deny", store.to_decide, *store.args(), "--as", "erin", "--role", "approver", "--comment", comment
    )
    assert code == 0, output
    assert_nothing_raw(output)
    assert_shown_escaped(output)


def test_review_errors_naming_stored_text_are_escaped(store: Store) -> None:
    # The template's name and the reviewer's are the store's and the caller's: the refusal names them.
    code, output = run("review", "approve", store.to_decide, *store.args(), "--as", "carol\x1b]0;x\x07\u202e\nfake")
    assert code == 1, output
    assert "lacks the role" in output
    assert_nothing_raw(output)


def test_review_shows_an_integrity_failure_naming_a_hostile_reviewer_escaped(store: Store) -> None:
    async def unseal(conn_url: str) -> None:
        database = open_database(conn_url)
        try:
            await database.write(
                lambda conn: conn.execute(update(_D).where(_D.c.request_id == store.pending).values(seal=None))
            )
        finally:
            await database.close()

    asyncio.run(unseal(store.url))
    for command in (["list"], ["show", store.pending]):
        code, output = run("review", *command, *store.args())
        assert code == 0, output
        assert "carries no seal" in output
        assert_nothing_raw(output)


# -- upgrade seal-requests -----------------------------------------------------------------------


def test_upgrade_seal_requests_shows_what_it_sealed_and_left_escaped(store: Store) -> None:
    def rewind(conn: Connection) -> None:
        # Both requests as the first release stored them; one with a decision whose seal is forged.
        conn.execute(update(_R).values(content_seal=None, rules_json=None, reviewer_role=None))
        conn.execute(update(_D).where(_D.c.request_id == store.pending).values(seal=None))
        forged = {"request_id": store.to_decide, "reviewer": "mallory" + REVIEWER, "decision": "approve"}
        conn.execute(_D.insert().values(**forged, comment=None, decided_at=1, seal="k1:AAAA"))

    async def write() -> list[str]:
        database = open_database(store.url)
        try:
            await database.write(rewind)
            return await database.read(lambda conn: list(conn.execute(select(_R.c.request_id)).scalars()))
        finally:
            await database.close()

    assert len(asyncio.run(write())) == 2
    args = [*store.args(), "--template", store.text, "--as", "ops\x1b[2J\u202e"]
    for extra in (["--dry-run"], ["--json", "--dry-run"], []):
        code, output = run("upgrade", "seal-requests", *args, *extra)
        assert code == 0, output
        assert_nothing_raw(output)
    assert "sealed 1 approval request stored before sealing" in output
    assert "left 1 approval request as found" in output
    assert "does not authenticate" in output
    assert_shown_escaped(output)
    code, output = run("upgrade", "seal-requests", *args)
    assert code == 1, output
    assert "the step runs once" in output
    assert_nothing_raw(output)


# -- serve and arap-server start-up lines --------------------------------------------------------

#: A request id of a database writer's making (64 characters at most): CSI, OSC 0, RLO, a line break.
HOSTILE_ID = "\x1b[2J\x1b]0;t\x07\u202e\ncarol: deny \x9b1A"


def _plant(store_url: str, migrations: tuple[Migrations, ...]) -> None:
    """An open request with the hostile id and no seals, and an unsealed decision by a hostile reviewer."""

    async def plant() -> None:
        database = open_database(store_url)
        try:
            await migrate(database, *migrations)
            row = {
                "request_id": HOSTILE_ID,
                "idempotency_key": "k" * 40,
                "body_digest": "0" * 64,
                "body_json": "{}",
                "status": "approved",
                "tool_name": "wire_transfer",
                "requester": "alice",
                "template": "treasury",
                "approvals_required": 1,
                "created_at": 1,
                "updated_at": 1,
                "version": 0,
            }
            decision = {
                "request_id": HOSTILE_ID,
                "reviewer": "carol\x1b]52;c;ZXZpbA==\x07\u2066",
                "decision": "approve",
            }

            def write(conn: Connection) -> None:
                conn.execute(_R.insert().values(**row))
                conn.execute(_D.insert().values(**decision, comment=None, decided_at=1))

            await database.write(write)
        finally:
            await database.close()

    asyncio.run(plant())


@pytest.mark.slow
def test_serve_start_up_lines_show_stored_ids_escaped(db_url: str, tmp_path: Path) -> None:
    from mcp_approval.approval.persistence.schema import APPROVAL_MIGRATIONS
    from mcp_approval.storage import SHARED_MIGRATIONS
    from mcp_approval.tasks.schema import TASKS_MIGRATIONS

    history = (TASKS_MIGRATIONS, AUDIT_MIGRATIONS, SHARED_MIGRATIONS, APPROVAL_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS)
    _plant(db_url, history)
    server = TreasuryServer(deployment_dir(tmp_path), db_url=db_url).start()
    server.kill()
    log = server.log()
    assert "open approval requests without their seals: 1 (\\x1b[2J\\x1b]0;t\\x07\\u202e\\n…)" in log, log
    assert_nothing_raw(log)


@pytest.mark.slow
def test_arap_server_start_up_lines_show_stored_ids_escaped(db_url: str, tmp_path: Path) -> None:
    from mcp_approval.reference.ars_schema import ARS_MIGRATIONS
    from mcp_approval.storage import SHARED_MIGRATIONS

    _plant(db_url, (AUDIT_MIGRATIONS, SHARED_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS, ARS_MIGRATIONS))
    pair = arap_deployment(tmp_path, ars_overrides={"store": {"url": db_url}})
    try:
        pair.ars.start()
    finally:
        pair.kill()
    log = pair.ars.log()
    assert "open approval requests without their seals: 1 (\\x1b[2J\\x1b]0;t\\x07\\u202e\\n…)" in log, log
    assert_nothing_raw(log)


# -- the tasks demo ------------------------------------------------------------------------------


def test_tasks_demo_lines_show_outcomes_escaped_and_markup_as_text() -> None:
    """An outcome quotes what a server or client said (an error's text): shown, never obeyed."""
    text = hostile("sqlite://", "H")
    result = TasksDemoResult("quick call " + MARKUP, "inline result", f"error: RuntimeError: {text}", False, 12)
    out = io.StringIO()
    console = Console(file=out, width=4000, color_system=None, force_terminal=False)
    print_result(console, result)
    console.print(_summary([result]))
    printed = out.getvalue()
    assert_nothing_raw(printed)
    assert_shown_escaped(printed)
    assert "[bold]loud[/bold]" in printed  # markup printed as it was written, not applied
    assert "[link=https://evil.example/]here[/link]" in printed


def test_the_output_check_sees_raw_text() -> None:
    """The check can fail: raw hostile text, or a fake line, is caught."""
    with pytest.raises(AssertionError, match="raw in the output"):
        assert_nothing_raw(hostile("sqlite://", "H"))
    with pytest.raises(AssertionError):
        assert_nothing_raw("decision  x\ncarol: deny")
