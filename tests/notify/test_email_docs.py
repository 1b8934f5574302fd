"""The e-mail channel's configuration in docs/reviewers.md works as printed."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from mcp_approval.config import ConfigError, load_config
from mcp_approval.notify import EmailChannelOptions
from mcp_approval.notify.email_message import LINK_PATH
from mcp_approval.server.deployment import build_deployment, deployment_app
from tests.fuzz.test_openapi import described, published, served
from tests.notify.test_chat_docs import _blocks, _deployment


def test_the_documented_email_channel_configures_a_deployment_with_its_link_pages(tmp_path: Path) -> None:
    (text,) = _blocks("E-mail", "toml")
    document = tomllib.loads(text)
    directory = _deployment(tmp_path, document)
    (directory / "smtp-password").write_text("documented-password\n")
    (directory / "smtp-password").chmod(0o600)
    config = load_config(directory / "config.toml")
    channel = config.notifications.channels["approvers-mail"]
    assert isinstance(channel, EmailChannelOptions)
    assert (channel.port, channel.security) == (587, "starttls")
    assert config.templates["treasury"].links_need_sign_in is True
    assert config.templates["close_quarter"].links_need_sign_in is False
    assert config.templates["refund"].links_need_sign_in is False
    deployment = build_deployment(config, base_url="http://127.0.0.1:1")
    outbox = deployment.approvals.outbox
    assert outbox is not None
    assert outbox.email_links is not None
    assert [history.name for history in outbox.migrations] == ["notify"]
    paths = [getattr(route, "path", None) for route in deployment.approvals.routes()]
    assert paths.count(LINK_PATH) == 2  # GET shows the page, POST decides
    app = deployment_app(deployment)
    assert described(published(app)) == served(app)


def test_a_login_without_tls_and_a_missing_password_file_are_refused_naming_the_field(tmp_path: Path) -> None:
    (text,) = _blocks("E-mail", "toml")
    document = tomllib.loads(text)
    document["notifications"]["channels"]["approvers-mail"]["security"] = "none"
    directory = _deployment(tmp_path / "clear", document)
    with pytest.raises(ConfigError, match="an SMTP login needs security"):
        load_config(directory / "config.toml")
    directory = _deployment(tmp_path / "nofile", tomllib.loads(text))
    config = load_config(directory / "config.toml")
    with pytest.raises(ConfigError, match=r"approvers-mail\.password_file: cannot read"):
        build_deployment(config, base_url="http://127.0.0.1:1")
