"""``mcp-approval review approve --similar``, ``review rules``, ``review revoke`` and deciding several
requests at once, through Typer's CliRunner against a real store (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import secrets
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mcp_approval.backends.contract import ApprovalSubmission
from mcp_approval.backends.local.schema import LOCAL_BACKEND_MIGRATIONS
from mcp_approval.cli.main import app
from mcp_approval.config import load_config
from mcp_approval.server.local_backend import local_backend_from_config
from mcp_approval.storage import AUDIT_MIGRATIONS, migrate, open_database
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
binding_keys = {{ k1 = "{key}" }}

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
similar_rule_max_s = 7200

[templates.closed]
similar_rules = false
"""

runner = CliRunner()


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "deploy.toml"
    path.write_text(CONFIG.format(key=base64.b64encode(os.urandom(32)).decode()), encoding="utf-8")
    return path


def seed(config_path: Path, db: str, *submissions: ApprovalSubmission, rules: bool = False) -> list[str]:
    """Submit requests through the backend the config describes; ``rules``: then put each to the rules."""

    async def run() -> list[str]:
        database = open_database(db)
        try:
            await migrate(database, AUDIT_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS)
            backend = local_backend_from_config(load_config(config_path), database, with_resolvers=False)
            handles = []
            for sub in submissions:
                handle = await database.write(
                    lambda conn, sub=sub: backend.submit_in(conn, secrets.token_urlsafe(32), sub)
                )
                if rules:
                    await backend.decide_by_similar_rules(handle)
                handles.append(handle)
            return handles
        finally:
            await database.close()

    return asyncio.run(run())


def review(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["review", *args])
    return result.exit_code, result.output


def test_approve_similar_then_list_and_revoke(config_path: Path, db_url: str) -> None:
    (first,) = seed(config_path, db_url, submission(requester="dave"))
    common = ["--config", str(config_path), "--db", db_url]
    code, out = review(
        "approve", first, *common, "--as", "bob", "--similar", "--for", "2h", "--uses", "2",
        "--arg", "amount=range:0..500", "--arg", "to=one-of:acct-1,acct-2",
    )  # fmt: skip
    assert code == 0, out
    assert "approved" in out
    assert "similar-call rule sim_" in out
    assert 'transfer by dave where amount in [0, 500], secret = [redacted], to in ["acct-1","acct-2"]' in out
    later = seed(
        config_path,
        db_url,
        submission(requester="dave", arguments={"amount": 499, "to": "acct-2", "secret": "s3cr3t"}),
        submission(requester="dave", arguments={"amount": 501, "to": "acct-2", "secret": "s3cr3t"}),
        rules=True,
    )
    states = [json.loads(review("show", h, *common, "--json")[1])["status"] for h in later]
    assert states == ["approved", "pending"]
    code, out = review("rules", *common, "--json")
    assert code == 0, out
    (rule,) = json.loads(out)
    assert (rule["author"], rule["uses"], rule["state"]) == ("bob", 1, "active")
    code, out = review("rules", *common)
    assert rule["id"] in out
    assert "1/2" in out
    code, out = review("revoke", rule["id"], *common, "--as", "dave")
    assert code == 1
    assert "may not revoke" in out or "no similar-call rule" in out
    code, out = review("revoke", rule["id"], *common, "--as", "alice")
    assert code == 0, out
    assert f"revoked similar-call rule {rule['id']} (1 of 2 calls decided)" in out
    assert json.loads(review("rules", *common, "--json")[1]) == []
    (after,) = seed(config_path, db_url, submission(requester="dave"), rules=True)
    assert json.loads(review("show", after, *common, "--json")[1])["status"] == "pending"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--uses", "2"], "--similar needs --for"),
        (["--for", "1h"], "--similar needs --uses"),
        (["--for", "3h", "--uses", "2"], "lasts at most 7200 s"),
        (["--for", "soon", "--uses", "2"], "--for 'soon'"),
        (["--for", "1h", "--uses", "2", "--arg", "amount"], "NAME=KIND:VALUE"),
        (["--for", "1h", "--uses", "2", "--arg", "amount=range:a..b"], "LOW..HIGH"),
        (["--for", "1h", "--uses", "2", "--arg", "amount=range:0..1", "--arg", "amount=equal:1"], "given twice"),
        (["--for", "1h", "--uses", "2", "--arg", "to=prefix:bank"], "own value"),
    ],
)
def test_a_bad_similar_option_names_itself_and_approves_nothing(
    config_path: Path, tmp_path: Path, extra: list[str], message: str
) -> None:
    db = f"sqlite:///{tmp_path / 'bad.db'}"
    (first,) = seed(config_path, db, submission(requester="dave"))
    common = ["--config", str(config_path), "--db", db]
    code, out = review("approve", first, *common, "--as", "bob", "--similar", *extra)
    assert code == 1
    assert message in out
    assert json.loads(review("show", first, *common, "--json")[1])["status"] == "pending"


def test_a_template_that_forbids_rules_and_options_without_similar(config_path: Path, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'closed.db'}"
    (first,) = seed(config_path, db, submission(requester="dave", template="closed"))
    common = ["--config", str(config_path), "--db", db]
    code, out = review("approve", first, *common, "--as", "bob", "--similar", "--for", "1h", "--uses", "1")
    assert code == 1
    assert "forbids similar-call rules" in out
    code, out = review("approve", first, *common, "--as", "bob", "--uses", "1")
    assert code == 1
    assert "go with --similar" in out


def test_several_requests_are_decided_each_on_its_own(config_path: Path, db_url: str) -> None:
    mine, theirs, other = seed(
        config_path,
        db_url,
        submission(requester="bob"),
        submission(requester="dave"),
        submission(requester="dave", arguments={"amount": 3}),
    )
    common = ["--config", str(config_path), "--db", db_url]
    code, out = review("approve", theirs, mine, "apr_missing", other, *common, "--as", "bob")
    assert code == 1
    assert f"{theirs}: approved" in out
    assert f"{mine}: refused: bob made this request" in out
    assert "apr_missing: refused: no such approval request" in out
    assert f"{other}: approved" in out
    assert "2 of 4 decided" in out
    code, out = review("deny", mine, *common, "--as", "alice")
    assert code == 0, out
    assert "denied" in out
