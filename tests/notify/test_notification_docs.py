"""The notification configuration and the receiver's verification code in docs/operators.md work as printed."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from mcp_approval.clock import SystemClock
from mcp_approval.config import load_config
from mcp_approval.notify import Notification, WebhookChannel, WebhookChannelOptions
from mcp_approval.server.deployment import build_deployment
from tests.support.treasury import deployment_dir

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operators.md"
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    return text[text.index("## Notifications") :]


def _blocks(language: str) -> list[str]:
    return [code for lang, code in _BLOCK.findall(_section()) if lang == language]


def _merge(into: dict[str, Any], document: dict[str, Any]) -> dict[str, Any]:
    for key, value in document.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value
    return into


def test_the_documented_channels_configure_a_deployment(tmp_path: Path) -> None:
    merged: dict[str, Any] = {}
    for block in _blocks("toml"):
        _merge(merged, tomllib.loads(block))
    assert set(merged["notifications"]["channels"]) == {"ops-hook", "slack", "teams", "email"}
    example = tomllib.loads((deployment_dir(tmp_path / "plain") / "config.toml").read_text())
    templates = _merge(example["templates"], merged.pop("templates"))
    directory = deployment_dir(tmp_path, {"notifications": merged["notifications"], "templates": templates})
    config = load_config(directory / "config.toml")
    assert config.templates["close_quarter"].notify == ["slack", "teams", "email"]
    deployment = build_deployment(config, base_url="http://127.0.0.1:1")
    assert deployment.approvals.outbox is not None  # every Apprise URL was understood


def _signed(secret: str, notification: Notification) -> tuple[bytes, dict[str, str]]:
    channel = WebhookChannel(WebhookChannelOptions(url="http://127.0.0.1:1/", secret=secret), timeout_s=1)
    body = notification.body()
    return body.encode(), channel.headers(notification, body)


def test_the_documented_receiver_verifies_what_a_channel_signs(capsys: pytest.CaptureFixture[str]) -> None:
    (code,) = _blocks("python")
    namespace: dict[str, Any] = {}
    exec(compile(code, str(PAGE), "exec"), namespace)
    receive, secret = namespace["receive"], namespace["SECRET"]
    data = {
        "tool": "wire_transfer",
        "progress": "0 of 1 approval",
        "console_url": "https://a.example/console/requests/x",
    }
    now = SystemClock().now_ms()
    notification = Notification("ntf_1", "approval.requested", now, "apr_x", "treasury", 7, data)
    body, headers = _signed(secret, notification)

    assert receive(body, headers) == 204
    assert capsys.readouterr().out.split() == [
        "approval.requested",
        "wire_transfer",
        "0",
        "of",
        "1",
        "approval",
        data["console_url"],
    ]
    assert receive(body, headers) == 204  # the same id again: acknowledged, not handled twice
    assert capsys.readouterr().out == ""
    assert receive(body.replace(b"wire_transfer", b"wire_transfor"), headers) == 400
    other_body, other_headers = _signed("whsec_" + "A" * 44, notification)
    assert receive(other_body, other_headers) == 400
