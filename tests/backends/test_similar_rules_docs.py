"""The similar-call rule examples in docs/reviewers.md work as printed: the template settings load,
the CLI line approves and writes the rule it describes, and the API body is a rule the backend takes."""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from mcp_approval.backends import ApprovalStatus, ApprovalSubmission, ApprovalTemplate, SimilarRuleSpec
from mcp_approval.keyring import BindingCipher
from tests.backends.conftest import BackendFactory, submission
from tests.cli.test_review_similar import CONFIG, review, seed

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reviewers.md"
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def invoice(amount: int) -> ApprovalSubmission:
    return submission(requester="dave", template="treasury", arguments={"amount": amount, "memo": "INV-7", "to": "a"})


INVOICE = invoice(1200)


def blocks(language: str) -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index("## Approving similar calls, and several at once")
    section = text[start : text.index("\n## ", start + 1)]
    return [code for lang, code in _BLOCK.findall(section) if lang == language]


def deployment(tmp_path: Path) -> Path:
    (settings,) = blocks("toml")
    path = tmp_path / "deploy.toml"
    config = CONFIG.format(key=base64.b64encode(os.urandom(32)).decode())
    carol = '\n[[principals]]\ntoken = "carol-token-1"\nid = "carol"\nroles = ["approver"]\n'
    path.write_text(config + carol + "\n" + settings, encoding="utf-8")
    return path


def test_the_documented_template_settings_load() -> None:
    (settings,) = blocks("toml")
    template = ApprovalTemplate(**tomllib.loads(settings)["templates"]["treasury"])
    assert (template.similar_rules, template.similar_rule_max_s, template.similar_rule_max_uses) == (True, 28800, 50)


def test_the_documented_cli_lines_write_list_and_revoke_the_rule(tmp_path: Path) -> None:
    config = deployment(tmp_path)
    db = f"sqlite:///{tmp_path / 'docs.db'}"
    (first,) = seed(config, db, INVOICE)
    approve, listing, revoke = (shlex.split(line) for line in blocks("bash")[0].splitlines())
    assert approve[:3] == ["mcp-approval", "review", "approve"]
    code, out = review(*[first if a == "ID" else str(config) if a == "FILE" else a for a in approve[2:]], "--db", db)
    assert code == 0, out
    assert 'amount in [0, 5000], memo starts with "INV-"' in out
    (later,) = seed(config, db, invoice(4999), rules=True)
    assert json.loads(review("show", later, "--config", str(config), "--db", db, "--json")[1])["status"] == "approved"
    listed = [a for a in listing[2:] if a not in ("[--all]", "[--json]")]
    code, out = review(*[str(config) if a == "FILE" else a for a in listed], "--db", db, "--json")
    (rule,) = json.loads(out)
    assert rule["uses"] == 1
    code, out = review(
        *[rule["id"] if a == "RULE_ID" else str(config) if a == "FILE" else a for a in revoke[2:]], "--db", db
    )
    assert code == 0, out


@pytest.mark.anyio
async def test_the_documented_api_body_is_a_rule_the_backend_takes(make_backend: BackendFactory) -> None:
    (body_text,) = blocks("json")
    body = json.loads(body_text)
    spec = SimilarRuleSpec.from_json(body["similar"])
    templates = {"treasury": ApprovalTemplate(**tomllib.loads(blocks("toml")[0])["templates"]["treasury"])}
    backend = make_backend(seal=BindingCipher({"k1": os.urandom(32)}), templates=templates)
    first = await backend.submit("docs-key", INVOICE)
    record, rule = await backend.approve_similar(first, "carol", spec, body["comment"])
    assert record.status is ApprovalStatus.APPROVED
    assert (rule.max_uses, rule.scope.principal if rule.scope else None) == (20, "dave")
