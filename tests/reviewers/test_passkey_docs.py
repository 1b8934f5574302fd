"""The passkey section of docs/reviewers.md works as printed: its configuration builds a deployment
that mounts the passkey routes, and the refusal it quotes is the one Slack users are told."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from mcp_approval.backends import StepUpRequiredError
from mcp_approval.backends.local.step_up import check_step_up
from mcp_approval.config import load_config
from mcp_approval.server.deployment import build_deployment, deployment_app
from tests.fuzz.test_openapi import described, published, served
from tests.support.treasury import deployment_dir

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reviewers.md"
_BLOCK = re.compile(r"^ *```(\w+)\n(.*?)^ *```", re.MULTILINE | re.DOTALL)
TITLE = "## Passkey step-up"


def _section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(TITLE)
    return text[start : text.find("\n## ", start + 1)]


def test_the_documented_configuration_serves_passkeys_on_the_documented_routes(tmp_path: Path) -> None:
    [toml_text] = [code for language, code in _BLOCK.findall(_section()) if language == "toml"]
    documented = tomllib.loads(toml_text)
    example = tomllib.loads((deployment_dir(tmp_path / "plain") / "config.toml").read_text())
    server = example["server"] | documented["server"] | {"dev_mode": True}
    directory = deployment_dir(
        tmp_path, {"server": server, "templates": example["templates"] | documented["templates"]}
    )
    config = load_config(directory / "config.toml")
    assert config.templates["vault"].step_up == "passkey"
    deployment = build_deployment(config, base_url=documented["server"]["base_url"])
    passkeys = deployment.approvals.passkeys
    assert passkeys is not None
    assert passkeys.origin == "https://approvals.example.com"
    assert passkeys.rp_id == "approvals.example.com"
    paths = {getattr(route, "path", "") for route in deployment.approvals.routes()}
    [text_block] = [code for language, code in _BLOCK.findall(_section()) if language == "text" and "POST" in code]
    for documented_path in re.findall(r"POST (\S+)", text_block):
        assert documented_path.replace("{id}", "{request_id}") in paths
    assert {"/console/passkeys", "/console/requests/{request_id}/passkey"} <= paths
    # The published OpenAPI document describes exactly the routes served, the passkey ones included.
    app = deployment_app(deployment)
    assert described(published(app)) == served(app)


def test_the_quoted_slack_refusal_is_what_the_backend_refuses_with() -> None:
    with pytest.raises(StepUpRequiredError) as refused:
        check_step_up({"template": "vault"}, "passkey", "approve", None)
    # Slack's decider words a NotEligibleError so (tests/reviewers/test_passkeys.py drives it).
    told = f"Nothing was recorded: you may not decide this request ({refused.value})."
    assert told in " ".join(_section().split())
