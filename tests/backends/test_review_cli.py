"""The ``mcp-approval review`` commands, run through Typer's CliRunner against a real store."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mcp_approval.backends import ApprovalTemplate, LocalApprovalBackend
from mcp_approval.backends.contract import ApprovalStatus, ApprovalSubmission
from mcp_approval.backends.local.schema import LOCAL_BACKEND_MIGRATIONS
from mcp_approval.cli.main import app
from mcp_approval.config import load_config
from mcp_approval.keyring import binding_cipher
from mcp_approval.server.local_backend import local_backend_from_config
from mcp_approval.storage import AUDIT_MIGRATIONS, AuditLog, migrate, open_database
from tests.backends.conftest import submission

CONFIG = """
[server]
dev_mode = true

[store]
url = "sqlite:///review.db"

[policy]
cedar = "p.cedar"

[tools]
module = "t.py"

[approval]
redact_arguments = ["secret"]

[[principals]]
token = "alice-token"
id = "alice"
roles = ["approver"]

[[principals]]
token = "bob-token-1"
id = "bob"
roles = ["approver"]

[[principals]]
token = "dave-token"
id = "dave"
roles = []

[templates.single]

[templates.pair]
approvals_required = 2

[[resolvers]]
template = "pair"
callable = "no_such_module_xyz:decide"
"""

runner = CliRunner()


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "deploy.toml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


def seed(config_path: Path, db: str, *submissions: ApprovalSubmission) -> list[str]:
    """Submit requests through the backend the config describes (resolvers off: one cannot load)."""

    async def run() -> list[str]:
        database = open_database(db)
        try:
            await migrate(database, AUDIT_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS)
            backend = local_backend_from_config(load_config(config_path), database, with_resolvers=False)
            return [await backend.submit(secrets.token_urlsafe(32), s) for s in submissions]
        finally:
            await database.close()

    return asyncio.run(run())


def review(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["review", *args])
    return result.exit_code, result.output


def test_list_show_and_approve(config_path: Path, db_url: str) -> None:
    (handle,) = seed(config_path, db_url, submission(requester="dave", template="pair"))
    common = ["--config", str(config_path), "--db", db_url]
    code, out = review("list", *common, "--json")
    assert code == 0, out
    listed = json.loads(out)["approvals"]
    assert [a["id"] for a in listed] == [handle]
    assert listed[0]["arguments"]["secret"] == "[redacted]"
    code, out = review("list", *common)
    assert code == 0, out
    assert handle in out
    assert "0/2" in out

    code, out = review("approve", handle, *common, "--as", "alice", "--comment", "ok by me")
    assert code == 0, out
    assert "pending" in out
    code, out = review("approve", handle, *common, "--as", "bob")
    assert code == 0, out
    code, out = review("show", handle, *common, "--json")
    assert code == 0, out
    shown = json.loads(out)
    assert shown["status"] == ApprovalStatus.APPROVED.value
    assert [(d["reviewer"], d["comment"]) for d in shown["decisions"]] == [("alice", "ok by me"), ("bob", None)]
    code, out = review("list", *common, "--status", "decided", "--json")
    assert [a["id"] for a in json.loads(out)["approvals"]] == [handle]


def test_deny_is_audited(config_path: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'audit.db'}"
    (handle,) = seed(config_path, db, submission(requester="dave"))
    code, out = review("deny", handle, "--config", str(config_path), "--db", db, "--as", "bob", "--comment", "no")
    assert code == 0, out
    assert "denied" in out

    async def events() -> list[tuple[str, str | None]]:
        database = open_database(db)
        try:
            return [(e.kind, e.actor) for e in await AuditLog(database).events(handle)]
        finally:
            await database.close()

    assert asyncio.run(events()) == [
        ("approval.submitted", "dave"),
        ("approval.decision", "bob"),
        ("approval.denied", "bob"),
    ]


def test_the_config_store_is_used_without_db(config_path: Path) -> None:
    (handle,) = seed(config_path, f"sqlite:///{config_path.parent / 'review.db'}", submission(requester="dave"))
    code, out = review("show", handle, "--config", str(config_path))
    assert code == 0, out
    assert "transfer" in out
    assert "s3cr3t" not in out


def test_the_listing_and_a_request_read_as_aligned_plain_text(config_path: Path, db_url: str) -> None:
    """One line a request under an underlined header, each column where its header starts; a request's
    arguments keep their line breaks, continued under their own column."""
    handles = seed(config_path, db_url, submission(requester="dave"), submission(requester="erin-the-treasurer"))
    common = ["--config", str(config_path), "--db", db_url]
    code, out = review("list", *common)
    assert code == 0, out
    header, rule, *rows = out.splitlines()
    assert header.split() == ["id", "status", "tool", "requester", "template", "approvals", "expires"]
    assert set(rule.replace(" ", "")) == {"-"}
    assert sorted(row.split()[0] for row in rows) == sorted(handles)
    column = header.index("requester")
    assert sorted(row[column:].split()[0] for row in rows) == ["dave", "erin-the-treasurer"]
    assert all(row[column - 1] == " " for row in rows)

    code, out = review("show", handles[0], *common)
    assert code == 0, out
    lines = out.splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith("arguments "))
    value_column = lines[start].index("{")
    assert lines[start + 1][:value_column].strip() == ""  # the arguments' second line, under their column
    assert lines[start + 1][value_column:].startswith('  "')


def test_refusals_exit_with_a_message(config_path: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'refusals.db'}"
    (handle,) = seed(config_path, db, submission(requester="alice"))
    common = ["--config", str(config_path), "--db", db]
    code, out = review("approve", handle, *common, "--as", "alice")
    assert code == 1
    assert "self-approval" in out
    code, out = review("approve", handle, *common, "--as", "dave")
    assert code == 1
    assert "lacks the role" in out
    code, out = review("deny", handle, *common, "--as", "bob")
    assert code == 0, out
    code, out = review("approve", handle, *common, "--as", "bob")
    assert code == 1
    assert "already denied" in out
    for command in (["show", "nope"], ["approve", "nope", "--as", "bob"]):
        code, out = review(*command, *common)
        assert code == 1
        assert "no approval request" in out or "no such approval request" in out
    code, out = review("list", *common, "--status", "everything")
    assert code == 1
    assert "--status" in out


def test_a_bad_config_names_the_problem(tmp_path: Path) -> None:
    missing = tmp_path / "missing.toml"
    code, out = review("list", "--config", str(missing))
    assert code == 1
    assert "no such configuration file" in out
    broken = tmp_path / "broken.toml"
    broken.write_text('[policy]\ncedar = "p.cedar"\n', encoding="utf-8")
    code, out = review("list", "--config", str(broken))
    assert code == 1
    assert "tools" in out


def test_a_library_deployment_is_decided_from_the_cli_by_the_rules_stored_with_each_request(
    tmp_path: Path, db_url: str
) -> None:
    """A server built in code with a reviewer role other than ``approver``: no deployment file, no
    template named; the request's own sealed rules say who decides and how many approvals it needs."""
    key_file = tmp_path / "binding-keys.toml"
    key_file.write_text('key-1 = "' + base64.b64encode(secrets.token_bytes(32)).decode() + '"\n', encoding="utf-8")
    templates = {"payouts": ApprovalTemplate(reviewer_role="treasurer", approvals_required=2)}

    async def seed_sealed() -> str:
        database = open_database(db_url)
        try:
            await migrate(database, AUDIT_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS)
            seal = binding_cipher({}, key_file=key_file)
            backend = LocalApprovalBackend(database, templates=templates, roles=lambda _: frozenset(), seal=seal)
            return await backend.submit(secrets.token_urlsafe(32), submission(requester="dave", template="payouts"))
        finally:
            await database.close()

    handle = asyncio.run(seed_sealed())
    keys = ("--db", db_url, "--binding-key-file", str(key_file))
    code, out = review("approve", handle, "--db", db_url, "--as", "erin", "--role", "treasurer")
    assert code == 1
    assert "sealed under the server's binding key" in out
    code, out = review("approve", handle, *keys, "--as", "erin", "--role", "approver")
    assert code == 1
    assert "erin lacks the role 'treasurer'" in out
    code, out = review("approve", handle, *keys, "--as", "dave", "--role", "treasurer")
    assert code == 1
    assert "dave made this request" in out
    assert review("approve", handle, *keys, "--as", "erin", "--role", "treasurer")[0] == 0
    code, out = review("approve", handle, *keys, "--as", "frank", "--role", "treasurer")
    assert code == 0, out
    code, out = review("show", handle, *keys, "--json")
    shown = json.loads(out)
    assert shown["status"] == "approved"
    assert shown["integrity_failure"] is None
    code, out = review("approve", handle, *keys, "--as", "grace", "--role", "treasurer", "--config", "x.toml")
    assert code == 1
    assert "--binding-key-file is for --db without --config" in out
