"""Options are one model in code and in the file: same rules, same message; secrets never printed."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pydantic import ValidationError

from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.config import ConfigError, load_config
from mcp_approval.server.deployment import build_deployment
from mcp_approval.tasks import TaskOptions
from tests.support.treasury import deployment_dir

KEY = "3q2+7wABAgMEBQYHCAkKCwwNDg8QERITFBUWFxgZGhs="
CALLBACK_SECRET = "a-callback-secret-of-some-length"
PDP_TOKEN = "pdp-bearer-token-value"


def test_no_secret_appears_in_the_printed_config_or_options(tmp_path: Path) -> None:
    overrides = {"approval": {"binding_keys": {"k1": KEY}, "callback_secret": CALLBACK_SECRET}}
    config = load_config(deployment_dir(tmp_path, overrides) / "config.toml")
    tokens = list(config.tokens())
    assert tokens, "the treasury example has static tokens"
    deployment = build_deployment(config, base_url="http://127.0.0.1:8000")
    printed = [
        repr(config),
        str(config),
        config.model_dump_json(),
        repr(config.approval),
        repr(deployment.approval.options),
        str(deployment.approval.options),
        repr(ApprovalOptions(binding_keys={"k1": KEY}, callback_secret=CALLBACK_SECRET)),
    ]
    for secret in [KEY, CALLBACK_SECRET, *tokens]:
        for text in printed:
            assert secret not in text
    assert deployment.approval.options.callback_secret is not None
    assert deployment.approval.options.callback_secret.get_secret_value() == CALLBACK_SECRET


def test_a_remote_pdp_token_is_not_printed_either(tmp_path: Path) -> None:
    file = tmp_path / "remote.toml"
    policy = f'[policy]\npdp_url = "https://pdp.example.test"\npdp_token = "{PDP_TOKEN}"\n'
    file.write_text(policy + '[tools]\nmodule = "tools.py"\n', encoding="utf-8")
    config = load_config(file)
    assert PDP_TOKEN not in repr(config)
    assert config.policy.pdp_token is not None
    assert config.policy.pdp_token.get_secret_value() == PDP_TOKEN


@pytest.mark.parametrize(
    ("section", "model", "field", "value"),
    [
        ("approval", ApprovalOptions, "max_generations", 0),
        ("approval", ApprovalOptions, "binding_keys", {"k1": "not base64!"}),
        ("tasks", TaskOptions, "poll_interval_s", 0),
        ("tasks", TaskOptions, "max_tasks", -1),
    ],
)
def test_code_and_file_refuse_a_bad_option_with_the_same_message(
    tmp_path: Path, section: str, model: type[ApprovalOptions | TaskOptions], field: str, value: object
) -> None:
    with pytest.raises(ValidationError) as in_code:
        model.model_validate({field: value})
    with pytest.raises(ConfigError) as in_file:
        load_config(deployment_dir(tmp_path, {section: {field: value}}) / "config.toml")
    message = str(in_code.value.errors()[0]["msg"]).removeprefix("Value error, ")
    assert f"{section}.{field}" in str(in_file.value)
    assert message in str(in_file.value)


def test_every_option_of_code_is_a_key_of_the_file() -> None:
    from mcp_approval.config import ApprovalSection, TasksSection

    assert set(ApprovalOptions.model_fields) <= set(ApprovalSection.model_fields)
    assert set(TaskOptions.model_fields) <= set(TasksSection.model_fields)


def test_an_arap_server_file_still_compares_its_secret_principal_tokens(tmp_path: Path) -> None:
    from mcp_approval.reference.config import load_arap_config

    example = Path(__file__).resolve().parents[2] / "examples" / "treasury" / "arap-server.toml"
    shared = "a-token-both-use-0001"
    text = example.read_text(encoding="utf-8")
    text = text.replace('"treasury-mcp-client-token-dev"', f'"{shared}"').replace('"alice-token"', f'"{shared}"')
    (tmp_path / "arap-server.toml").write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="a client token is also a principal token"):
        load_arap_config(tmp_path / "arap-server.toml")


def test_an_arap_server_file_prints_no_client_token_or_callback_secret() -> None:
    from mcp_approval.reference.config import load_arap_config

    config = load_arap_config(Path(__file__).resolve().parents[2] / "examples" / "treasury" / "arap-server.toml")
    secrets = [*config.client_tokens(), *config.tokens()]
    assert config.arap.callback_secret is not None
    secrets.append(config.arap.callback_secret.get_secret_value())
    for text in (repr(config), str(config), config.model_dump_json()):
        for secret in secrets:
            assert secret not in text


def test_notification_secrets_never_appear_in_the_printed_config(tmp_path: Path) -> None:
    webhook_secret = "whsec_" + "c2VjcmV0LXNpZ25pbmcta2V5LW9mLTMyLWJ5dGVzISE="
    apprise_url = "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7FQ/#approvals"
    channels = {
        "hook": {"kind": "webhook", "url": "https://hooks.example.com/a", "secret": webhook_secret},
        "team": {"kind": "apprise", "urls": [apprise_url]},
    }
    config = load_config(deployment_dir(tmp_path, {"notifications": {"channels": channels}}) / "config.toml")
    printed = [repr(config), str(config), config.model_dump_json(), repr(config.notifications)]
    for text in printed:
        assert webhook_secret not in text
        assert "TIiajkdnlazkcOXrIdevi7FQ" not in text


@pytest.mark.parametrize(("mode", "warned"), [(0o640, True), (0o604, True), (0o600, False), (0o400, False)])
def test_a_binding_key_file_others_may_read_draws_one_warning_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: int, warned: bool
) -> None:
    directory = deployment_dir(tmp_path, {"approval": {"binding_keys": {}, "binding_key_file": "keys.toml"}})
    key_file = directory / "keys.toml"
    key_file.write_text(f'k1 = "{KEY}"\n', encoding="utf-8")
    key_file.chmod(mode)
    config = load_config(directory / "config.toml")
    with caplog.at_level(logging.WARNING):
        deployment = build_deployment(config, base_url="http://127.0.0.1:8000")
    assert deployment.approval.options.binding_key_file == key_file  # read from that file, and started
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "secret file" in r.message]
    expected = [
        f"approval.binding_key_file: the secret file {key_file} is readable by group or others "
        f"(mode {mode:04o}); chmod 600 it"
    ]
    assert warnings == (expected if warned else [])
