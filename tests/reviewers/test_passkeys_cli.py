"""``mcp-approval review approve`` and ``deny`` refuse a step-up template's request, naming the console."""

from __future__ import annotations

import asyncio
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

CONFIG = """
[server]
dev_mode = true

[policy]
cedar = "p.cedar"

[tools]
module = "t.py"

[[principals]]
token = "carol-token"
id = "carol"
roles = ["approver"]

[templates.vault]
step_up = "passkey"
"""


def seed(config_path: Path, db: str) -> str:
    async def run() -> str:
        database = open_database(db)
        try:
            await migrate(database, AUDIT_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS)
            backend = local_backend_from_config(load_config(config_path), database, with_resolvers=False)
            body = ApprovalSubmission(tool="open_vault", arguments={}, requester="alice", template="vault")
            return await backend.submit(secrets.token_urlsafe(16), body)
        finally:
            await database.close()

    return asyncio.run(run())


@pytest.mark.parametrize("command", ["approve", "deny"])
def test_the_cli_refuses_and_names_the_console(tmp_path: Path, db_url: str, command: str) -> None:
    config_path = tmp_path / "deploy.toml"
    config_path.write_text(CONFIG, encoding="utf-8")
    handle = seed(config_path, db_url)
    common = ["--config", str(config_path), "--db", db_url]
    result = CliRunner().invoke(app, ["review", command, handle, *common, "--as", "carol"])
    assert result.exit_code == 1
    assert "requires a passkey for every decision: decide it with your passkey in the console" in result.output
    shown = CliRunner().invoke(app, ["review", "show", handle, *common, "--json"])
    assert shown.exit_code == 0, shown.output
    assert '"decisions": []' in shown.output
    assert '"status": "pending"' in shown.output
