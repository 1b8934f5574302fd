"""ARAP settings are one model in code and in the file: same rules, same message; secrets never printed."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from mcp_approval.backends.arap import ArapSettings
from mcp_approval.config import ArapSection, ConfigError, DeploymentConfig, load_config
from mcp_approval.server.arap_backend import arap_backend_from_config, pdp_from_config
from tests.support.treasury import to_toml

TOKEN = "the-pep-token-at-the-ars"
CALLBACK_SECRET = "a-callback-secret-of-some-length"
TOOLS = Path(__file__).resolve().parents[2] / "examples" / "treasury" / "tools.py"


def arap_config(tmp_path: Path, **arap: object) -> DeploymentConfig:
    """A deployment whose approvals go to an ARS, with ``[arap]`` = the token and ``arap``."""
    document = {
        "policy": {"pdp_url": "https://pdp.example.test"},
        "tools": {"module": str(TOOLS)},
        "approval": {"backend": "arap", "callback_secret": CALLBACK_SECRET},
        "arap": {"token": TOKEN, **arap},
    }
    path = tmp_path / "deploy.toml"
    path.write_text(to_toml(document), encoding="utf-8")
    return load_config(path)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("poll_max_s", 61),
        ("poll_initial_s", 0),
        ("timeout_s", -1),
        ("submit_attempts", 0),
        ("submit_attempts", 11),
        ("token", ""),
    ],
)
def test_code_and_file_refuse_a_bad_setting_with_the_same_message(tmp_path: Path, field: str, value: object) -> None:
    with pytest.raises(ValidationError) as in_code:
        ArapSettings.model_validate({"token": TOKEN, field: value})
    with pytest.raises(ConfigError) as in_file:
        arap_config(tmp_path, **{field: value})
    message = str(in_code.value.errors()[0]["msg"])
    assert f"arap.{field}: {message}" in str(in_file.value)


def test_the_file_keys_load_unchanged_and_reach_the_backend(tmp_path: Path) -> None:
    config = arap_config(
        tmp_path,
        allowed_origins=["https://ars.example.test"],
        dev_insecure_loopback=True,
        timeout_s=2.5,
        poll_initial_s=0.5,
        poll_max_s=30,
        submit_attempts=5,
        callback_url="https://mcp.example.test/approvals/callback",
    )
    backend = arap_backend_from_config(config, pdp_from_config(config))
    settings = backend.settings
    assert config.arap is not None
    assert settings.allowed_origins == ("https://ars.example.test",)
    assert settings.dev_insecure_loopback is True
    assert (settings.timeout_s, settings.poll_initial_s, settings.poll_max_s) == (2.5, 0.5, 30)
    assert settings.submit_attempts == 5
    assert settings.callback_url == "https://mcp.example.test/approvals/callback"
    assert settings.token.get_secret_value() == TOKEN
    # The two values other sections own are composed in.
    assert settings.callback_secret is not None
    assert settings.callback_secret.get_secret_value() == CALLBACK_SECRET
    assert settings.client_name == config.server.name
    assert backend.callback_state("k") is not None


@pytest.mark.parametrize(
    ("key", "owner"), [("callback_secret", "[approval] callback_secret"), ("client_name", "[server] name")]
)
def test_values_composed_from_other_sections_are_not_keys_of_arap(tmp_path: Path, key: str, owner: str) -> None:
    with pytest.raises(ConfigError) as raised:
        arap_config(tmp_path, **{key: "something"})
    assert f"arap.{key}" in str(raised.value)
    assert owner in str(raised.value)
    # In code they are ordinary settings.
    settings = ArapSettings.model_validate({"token": TOKEN, key: "something"})
    assert getattr(settings, key) is not None


def test_every_setting_of_code_is_a_key_of_the_file_but_the_composed_ones() -> None:
    assert set(ArapSection.model_fields) == set(ArapSettings.model_fields)
    file_keys = {name for name, field in ArapSection.model_fields.items() if field.exclude is not True}
    assert file_keys == set(ArapSettings.model_fields) - {"callback_secret", "client_name"}


def test_neither_the_token_nor_the_callback_secret_is_printed(tmp_path: Path) -> None:
    settings = ArapSettings(token=TOKEN, callback_secret=CALLBACK_SECRET)
    config = arap_config(tmp_path)
    backend = arap_backend_from_config(config, pdp_from_config(config))
    printed = [
        repr(settings),
        str(settings),
        settings.model_dump_json(),
        repr(config),
        str(config),
        config.model_dump_json(),
        repr(config.arap),
        repr(backend.settings),
        str(backend.settings),
    ]
    for secret in (TOKEN, CALLBACK_SECRET):
        for text in printed:
            assert secret not in text
    assert backend.settings.token.get_secret_value() == TOKEN
