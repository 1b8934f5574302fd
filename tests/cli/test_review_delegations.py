"""``mcp-approval review delegate``, ``review delegations``, ``review undelegate``, a delegated
decision in ``review show``, and ``audit verify`` naming an edited delegation, through Typer's
CliRunner against a real store (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
from pathlib import Path

import pytest
from sqlalchemy import update
from typer.testing import CliRunner

from mcp_approval.backends.local.schema import approval_delegations_table
from mcp_approval.cli.main import app
from mcp_approval.storage import open_database
from tests.backends.conftest import submission
from tests.cli.test_review_similar import CONFIG, review, seed

runner = CliRunner()
DELEGATING = (
    CONFIG
    + """
[[principals]]
token = "carol-token"
id = "carol"
roles = ["approver"]

[templates.short]
delegation_max_s = 3600
"""
)


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "deploy.toml"
    path.write_text(DELEGATING.format(key=base64.b64encode(os.urandom(32)).decode()), encoding="utf-8")
    return path


def test_delegate_decide_show_list_and_undelegate(config_path: Path, db_url: str) -> None:
    common = ["--config", str(config_path), "--db", db_url]
    (first, second) = seed(config_path, db_url, submission(), submission())
    code, out = review("approve", first, *common, "--as", "dave")
    assert code == 1
    assert "lacks the role" in out
    code, out = review("delegate", "--to", "dave", "--template", "single", "--for", "3d", "--as", "carol", *common)
    assert code == 0, out
    assert "dave decides single for carol until" in out
    code, out = review("delegations", *common, "--as", "dave", "--json")
    (delegation,) = json.loads(out)
    assert (delegation["delegator"], delegation["state"]) == ("carol", "active")
    code, out = review("approve", first, *common, "--as", "dave", "--comment", "carol is away")
    assert code == 0, out
    assert "dave for carol (delegated): approve" in out
    code, out = review("show", first, *common)
    assert "dave for carol (delegated): approve" in out
    shown = json.loads(review("show", first, *common, "--json")[1])
    assert shown["decisions"][0]["on_behalf_of"] == "carol"
    code, out = review("undelegate", delegation["id"], *common, "--as", "dave")
    assert code == 1
    assert "only carol" in out
    code, out = review("undelegate", delegation["id"], *common, "--as", "carol")
    assert code == 0, out
    assert f"revoked delegation {delegation['id']} (carol to dave)" in out
    code, out = review("approve", second, *common, "--as", "dave")
    assert code == 1
    assert json.loads(review("delegations", *common, "--json")[1]) == []
    code, out = review("delegations", *common, "--all")
    assert delegation["id"] in out
    assert "revoked" in out
    # The chain and the rows hold: audit verify is quiet about them.
    code, out = review_audit(config_path, db_url)
    assert code == 0, out
    assert "delegation" not in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--to", "dave", "--template", "single", "--for", "15d", "--as", "carol"], "at most 1.2096e+06 seconds"),
        (["--to", "dave", "--template", "short", "--for", "2h", "--as", "carol"], "at most 3600 seconds"),
        (["--to", "bob", "--template", "single", "--for", "1h", "--as", "dave"], "in their own right"),
        (["--to", "dave", "--template", "single", "--for", "soon", "--as", "carol"], "--for 'soon'"),
        (["--to", "dave", "--template", "nope", "--for", "1h", "--as", "carol"], "not configured"),
    ],
)
def test_delegate_refusals_name_the_rule(config_path: Path, db_url: str, args: list[str], message: str) -> None:
    code, out = review("delegate", *args, "--config", str(config_path), "--db", db_url)
    assert code == 1
    assert message in out


def test_delegate_needs_the_deployment_file(db_url: str) -> None:
    code, out = review(
        "delegate", "--to", "dave", "--template", "single", "--for", "1h", "--as", "carol", "--db", db_url
    )
    assert code == 1
    assert "give --config" in out


def test_audit_verify_names_an_edited_delegation(config_path: Path, db_url: str) -> None:
    common = ["--config", str(config_path), "--db", db_url]
    (first,) = seed(config_path, db_url, submission())
    review("delegate", "--to", "dave", "--template", "single", "--for", "1h", "--as", "carol", *common)
    assert review("approve", first, *common, "--as", "dave")[0] == 0
    (delegation,) = json.loads(review("delegations", *common, "--json")[1])

    async def lengthen() -> None:
        database = open_database(db_url)
        table = approval_delegations_table
        edit = update(table).where(table.c.delegation_id == delegation["id"]).values(ends_at=2**50)
        try:
            await database.write(lambda conn: conn.execute(edit))
        finally:
            await database.close()

    asyncio.run(lengthen())
    code, out = review_audit(config_path, db_url)
    assert code == 1, out
    assert f"delegation: delegation {delegation['id']} (carol to dave): the stored delegation" in out
    assert f"delegation: the decision of request {first} by dave for carol (delegated): its delegation" in out
    listed = json.loads(review("delegations", *common, "--json", "--all")[1])
    assert listed[0]["state"] == "integrity failure"


def review_audit(config_path: Path, db_url: str) -> tuple[int, str]:
    result = runner.invoke(app, ["audit", "verify", "--config", str(config_path), "--db", db_url])
    return result.exit_code, result.output
