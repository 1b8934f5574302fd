"""The delegation examples in docs/reviewers.md work as printed: the template settings load, the CLI
lines delegate, list and revoke, and the API body is a delegation the backend takes."""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from mcp_approval.backends import ApprovalTemplate
from mcp_approval.keyring import BindingCipher
from tests.backends.conftest import BackendFactory
from tests.cli.test_review_similar import CONFIG, review

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reviewers.md"
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)
PRINCIPALS = '\n[[principals]]\ntoken = "carol-token-1"\nid = "carol"\nroles = ["approver"]\n'


def blocks(language: str) -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("## Delegation while away")
    section = text[start : text.index("\n## ", start + 1)]
    return [code for lang, code in _BLOCK.findall(section) if lang == language]


def test_the_documented_template_settings_load() -> None:
    (settings,) = blocks("toml")
    template = ApprovalTemplate(**tomllib.loads(settings)["templates"]["treasury"])
    assert (template.delegation, template.delegation_max_s) == (True, 604800)
    assert ApprovalTemplate().delegation_max_s == 14 * 86400


def test_the_documented_cli_lines_delegate_list_and_revoke(tmp_path: Path) -> None:
    (settings,) = blocks("toml")
    config = tmp_path / "deploy.toml"
    config.write_text(
        CONFIG.format(key=base64.b64encode(os.urandom(32)).decode())
        + PRINCIPALS
        + '\n[templates.treasury]\nreviewer_role = "approver"\n'
        + settings.replace("[templates.treasury]\n", ""),
        encoding="utf-8",
    )
    db = f"sqlite:///{tmp_path / 'docs.db'}"
    delegate, listing, revoke = (shlex.split(line) for line in blocks("bash")[0].splitlines())

    def run(words: list[str], delegation_id: str = "") -> tuple[int, str]:
        args = [str(config) if w == "FILE" else delegation_id if w == "DELEGATION_ID" else w for w in words[2:]]
        return review(*[a for a in args if not a.startswith("[")], "--db", db)

    code, out = run(delegate)
    assert code == 0, out
    assert "dave decides treasury for carol until" in out
    assert listing[:3] == ["mcp-approval", "review", "delegations"]
    code, out = review("delegations", "--config", str(config), "--db", db, "--as", "carol", "--json")
    assert code == 0, out
    (made,) = json.loads(out)
    code, out = run(revoke, made["id"])
    assert code == 0, out
    assert f"revoked delegation {made['id']} (carol to dave)" in out


@pytest.mark.anyio
async def test_the_documented_api_body_is_a_delegation(make_backend: BackendFactory) -> None:
    (body,) = blocks("json")
    asked = json.loads(body)
    templates = {"treasury": ApprovalTemplate(reviewer_role="approver")}
    backend = make_backend(seal=BindingCipher({"k1": os.urandom(32)}), templates=templates)
    made = await backend.delegate("carol", asked["delegate"], asked["template"], asked["duration_s"])
    assert made.ends_at - made.starts_at == 3 * 86400 * 1000
