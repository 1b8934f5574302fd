"""ARAP deployment settings: a bad file names the file and the field; the example wires HttpPDP + ARAP."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_approval.backends.arap import ArapBackend
from mcp_approval.config import ConfigError, load_config
from mcp_approval.policy.http import HttpPDP
from mcp_approval.server.arap_backend import arap_backend_from_config, pdp_from_config
from mcp_approval.server.deployment import build_deployment

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "treasury"
TOOLS = f'[tools]\nmodule = "{EXAMPLE / "tools.py"}"\n'
REMOTE = '[policy]\npdp_url = "https://pdp.example.com"\n' + TOOLS
ARAP = REMOTE + '[approval]\nbackend = "arap"\ncallback_secret = "s3cret-s3cret-s3cret"\n[arap]\ntoken = "t"\n'


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "deploy.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (REMOTE + '[approval]\nbackend = "arap"\n', "[arap]"),
        (TOOLS + '[policy]\ncedar = "p.cedar"\n[approval]\nbackend = "arap"\n[arap]\ntoken = "t"\n', "pdp_url"),
        ('[policy]\ncedar = "p.cedar"\npdp_url = "https://pdp.example.com"\n' + TOOLS, "policy"),
        (TOOLS + "[policy]\n", "exactly one of cedar"),
        (REMOTE + '[approval]\nbackend = "elsewhere"\n', "approval.backend"),
        (ARAP + "poll_max_s = 120\n", "arap.poll_max_s"),
        (ARAP + "surprise = 1\n", "arap.surprise"),
        (
            REMOTE + '[arap]\ntoken = "t"\ncallback_url = "https://mcp.example.com/approvals/callback"\n',
            "callback_secret",
        ),
        (REMOTE + "[arap]\ntimeout_s = 1\n", "arap.token"),
        (ARAP + 'callback_url = "https://u:p@mcp.example.com/approvals/callback"\n', "arap.callback_url"),
        (ARAP + 'callback_url = "https://mcp.example.com:99999/approvals/callback"\n', "arap.callback_url"),
        (ARAP + 'callback_url = "https://mcp.example.com:port/approvals/callback"\n', "arap.callback_url"),
    ],
)
def test_bad_arap_settings_name_file_and_field(tmp_path: Path, text: str, named: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert str(path) in str(raised.value)
    assert named in str(raised.value)


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ('allowed_origins = ["http://ars.example.com"]\n', "arap"),
        ('callback_url = "http://mcp.example.com/approvals/callback"\n', "arap.callback_url"),
        ('allowed_origins = ["not a url"]\n', "arap.allowed_origins"),
    ],
)
def test_insecure_or_malformed_origins_are_refused_at_startup(tmp_path: Path, extra: str, named: str) -> None:
    config = load_config(write(tmp_path, ARAP + extra))
    pdp = pdp_from_config(config)
    with pytest.raises(ConfigError) as raised:
        arap_backend_from_config(config, pdp)
    assert str(config.path) in str(raised.value)
    assert named in str(raised.value)


def test_a_plain_http_pdp_url_is_refused_off_loopback(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, ARAP.replace("https://pdp.example.com", "http://pdp.example.com")))
    with pytest.raises(ConfigError, match=r"policy\.pdp_url"):
        pdp_from_config(config)


def test_the_arap_example_wires_http_pdp_and_the_arap_backend(tmp_path: Path) -> None:
    config = load_config(EXAMPLE / "config-arap.toml")
    assert config.policy.pdp_url == "http://127.0.0.1:8181"
    deployment = build_deployment(config, store_url=f"sqlite:///{tmp_path / 'x.db'}", base_url="http://127.0.0.1:8000")
    assert isinstance(deployment.approval.pdp, HttpPDP)
    assert isinstance(deployment.gate.pdp, HttpPDP)
    assert isinstance(deployment.backend, ArapBackend)
    assert deployment.backend.settings.callback_url == "http://127.0.0.1:8000/approvals/callback"
    assert deployment.backend.settings.dev_insecure_loopback is True
