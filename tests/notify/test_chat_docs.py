"""The Slack app manifest and the Slack and Teams configurations in docs/reviewers.md work as printed."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from mcp_approval.config import load_config
from mcp_approval.notify.slack_interactions import INTERACTIONS_PATH
from mcp_approval.server.deployment import build_deployment
from tests.support.treasury import deployment_dir

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reviewers.md"
_BLOCK = re.compile(r"^ *```(\w+)\n(.*?)^ *```", re.MULTILINE | re.DOTALL)


def _section(title: str) -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def _blocks(title: str, language: str) -> list[str]:
    found = [code for lang, code in _BLOCK.findall(_section(title)) if lang == language]
    indent = [min(len(line) - len(line.lstrip()) for line in code.splitlines() if line.strip()) for code in found]
    return ["\n".join(line[cut:] for line in code.splitlines()) for code, cut in zip(found, indent, strict=True)]


def _deployment(tmp_path: Path, document: dict[str, Any]) -> Path:
    example = tomllib.loads((deployment_dir(tmp_path / "plain") / "config.toml").read_text())
    templates = example["templates"]
    for name, values in document.pop("templates").items():
        templates[name] |= values
    return deployment_dir(tmp_path, {"notifications": document["notifications"], "templates": templates})


def test_the_manifest_asks_for_the_scopes_the_channel_uses_and_names_its_request_url() -> None:
    (manifest_text,) = _blocks("Slack", "yaml")
    manifest = yaml.safe_load(manifest_text)
    (config_text,) = _blocks("Slack", "toml")
    (name,) = tomllib.loads(config_text)["notifications"]["channels"]
    assert manifest["oauth_config"]["scopes"]["bot"] == ["chat:write", "users:read", "users:read.email"]
    interactivity = manifest["settings"]["interactivity"]
    assert interactivity["is_enabled"] is True
    assert urlsplit(interactivity["request_url"]).path == INTERACTIONS_PATH.replace("{channel}", name)
    assert manifest["settings"]["socket_mode_enabled"] is False


def test_the_documented_slack_and_teams_channels_configure_a_deployment(tmp_path: Path) -> None:
    (slack_text,) = _blocks("Slack", "toml")
    (teams_text,) = _blocks("Microsoft Teams", "toml")
    slack, teams = tomllib.loads(slack_text), tomllib.loads(teams_text)
    document = {
        "notifications": {"channels": slack["notifications"]["channels"] | teams["notifications"]["channels"]},
        "templates": slack["templates"] | teams["templates"],
    }
    directory = _deployment(tmp_path, document)
    (directory / "slack-bot-token").write_text("xoxb-0-documented\n")
    (directory / "slack-signing-secret").write_text("documented-signing-secret\n")
    config = load_config(directory / "config.toml")
    assert config.templates["close_quarter"].notify == ["slack-approvals"]
    assert config.templates["treasury"].notify == ["treasury-teams"]
    deployment = build_deployment(config, base_url="http://127.0.0.1:1")
    outbox = deployment.approvals.outbox
    assert outbox is not None
    assert [route.path for route in outbox.routes()] == [INTERACTIONS_PATH]  # type: ignore[attr-defined]
