"""The demo's embedded deployment stays a copy of ``examples/treasury`` plus its documented additions."""

from __future__ import annotations

import tomllib
from pathlib import Path

from mcp_approval.config import load_config
from mcp_approval.demo.context import METRICS_TOKEN
from mcp_approval.demo.oidc_issuer import DEMO_CLIENT_ID, DEMO_CLIENT_SECRET, ISSUER_ADDRESS
from mcp_approval.demo.scenarios_chat import DEMO_SLACK_SECRET, DEMO_SLACK_TOKEN
from mcp_approval.demo.servers import (
    ARAP_SERVER_ADDRESS,
    ARAP_TREASURY_ADDRESS,
    TREASURY_ADDRESS,
    materialize,
    point_at,
)
from mcp_approval.policy.source import TextSource
from mcp_approval.reference.config import load_arap_config
from mcp_approval.server.validation import check_requestable_templates

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "treasury"
PACKAGED = Path(__file__).resolve().parents[2] / "src" / "mcp_approval" / "demo" / "treasury"
OPERATORS = Path(__file__).resolve().parents[2] / "docs" / "operators.md"
#: Files the example shares with the demo's embedded deployment, byte for byte.
EMBEDDED_IN_THE_EXAMPLE = ("entities.json", "tools.py")
POLICY_HEADER = (
    "// The demo's copy of examples/treasury/policy.cedar, plus the rules the demo needs (at the end).\n//\n"
)


def test_the_materialized_deployment_loads_and_names_the_port(tmp_path: Path) -> None:
    config_path = materialize(tmp_path / "treasury")
    point_at(config_path, {TREASURY_ADDRESS: 41234})
    config = load_config(config_path)
    assert config.tasks.approval_url == "http://127.0.0.1:41234/console/requests/{approval_id}"
    assert config.approval.binding_keys, "a fixed key: pending approvals survive scenario 8's restart"
    # Scenario 16 scrapes /metrics with the demo's scraper token.
    assert config.metrics.enabled
    assert config.metrics.bearer_token is not None
    assert config.metrics.bearer_token.get_secret_value() == METRICS_TOKEN
    assert f"with the token `{METRICS_TOKEN}`" in OPERATORS.read_text(encoding="utf-8"), "as the operators' page says"
    assert {p.name for p in tmp_path.joinpath("treasury").iterdir()} >= {
        "config.toml",
        "config-arap.toml",
        "arap-server.toml",
        "policy.cedar",
        "entities.json",
        "tools.py",
    }


def test_the_copy_matches_the_example(tmp_path: Path) -> None:
    folder = materialize(tmp_path / "treasury").parent
    # The packaged tools and entities are the source; the example holds plain copies of them.
    for name in EMBEDDED_IN_THE_EXAMPLE:
        assert (EXAMPLE / name).read_bytes() == (PACKAGED / name).read_bytes(), (
            f"examples/treasury/{name} differs from the packaged {name}: copy {PACKAGED / name} over it"
        )
        assert (folder / name).read_bytes() == (EXAMPLE / name).read_bytes()
    policy = (folder / "policy.cedar").read_text()
    assert policy.startswith(POLICY_HEADER)
    assert policy[len(POLICY_HEADER) :].startswith((EXAMPLE / "policy.cedar").read_text())


def test_the_demo_config_keeps_the_examples_principals_templates_and_resolvers(tmp_path: Path) -> None:
    demo = tomllib.loads(materialize(tmp_path / "treasury").read_text())
    example = tomllib.loads((EXAMPLE / "config.toml").read_text())
    # The demo's treasury template also notifies the demo's webhook receiver (scenario 14), Teams
    # workflow (scenario 18) and the approvers' e-mail (scenario 19), its close_quarter template Slack
    # (scenario 17); nothing else differs.
    assert demo["templates"]["treasury"].pop("notify") == ["demo-hook", "demo-teams", "demo-mail"]
    assert demo["templates"]["close_quarter"].pop("notify") == ["demo-slack"]
    assert set(demo["notifications"]["channels"]) == {"demo-hook", "demo-slack", "demo-teams", "demo-mail"}
    # Scenario 22's vault accounts: a template of the demo's own, whose decisions need a passkey.
    assert demo["templates"].pop("vault") == {
        "approvals_required": 1,
        "reviewer_role": "approver",
        "step_up": "passkey",
    }
    # Scenario 20's own template: reminded, then escalated (its policy rule is one of the demo's).
    reminded = demo["templates"].pop("reminded")
    assert (reminded["remind_after_s"], reminded["escalate_after_s"], reminded["escalate_to"]) == (2, 4, "treasurer")
    for section in ("principals", "templates", "resolvers", "policy", "tools"):
        assert demo[section] == example[section], section


def test_the_arap_pair_configs_load_with_the_addresses_filled_in(tmp_path: Path) -> None:
    folder = materialize(tmp_path / "treasury").parent
    addresses = {ARAP_SERVER_ADDRESS: 41001, ARAP_TREASURY_ADDRESS: 41002}
    for name in ("config-arap.toml", "arap-server.toml"):
        point_at(folder / name, addresses)
    treasury = load_config(folder / "config-arap.toml")
    assert treasury.approval.backend == "arap"
    assert treasury.policy.pdp_url == "http://127.0.0.1:41001"
    assert treasury.arap is not None
    assert treasury.arap.callback_url == "http://127.0.0.1:41002/approvals/callback"
    ars = load_arap_config(folder / "arap-server.toml")
    assert ars.arap.callback_allowlist == ["http://127.0.0.1:41002"]
    assert treasury.arap.token.get_secret_value() in ars.client_tokens()
    assert treasury.approval.callback_secret is not None
    assert ars.arap.callback_secret is not None
    assert ars.arap.callback_secret.get_secret_value() == treasury.approval.callback_secret.get_secret_value()
    # The pair serves the demo's policy: every template it names is one the arap-server decides.
    policy = TextSource.read(folder / "policy.cedar")
    check_requestable_templates(policy, ars.templates, config_path=folder / "arap-server.toml")


def test_the_slack_channel_s_files_hold_the_values_the_demo_s_stand_in_expects(tmp_path: Path) -> None:
    folder = materialize(tmp_path / "treasury").parent
    assert (folder / "slack-bot-token").read_text().strip() == DEMO_SLACK_TOKEN
    assert (folder / "slack-signing-secret").read_text().strip() == DEMO_SLACK_SECRET
    channel = load_config(folder / "config.toml").notifications.channels["demo-slack"]
    assert channel.kind == "slack"
    assert channel.reviewers == {"U0CAROL": "carol", "U0DAVE": "dave"}


def test_the_console_signs_in_with_the_demo_issuer_and_its_client_secret(tmp_path: Path) -> None:
    config_path = materialize(tmp_path / "treasury")
    point_at(config_path, {TREASURY_ADDRESS: 41234, ISSUER_ADDRESS: 41235})
    oidc = load_config(config_path).console.oidc
    assert oidc is not None
    assert (oidc.issuer, oidc.client_id) == ("http://127.0.0.1:41235", DEMO_CLIENT_ID)
    assert oidc.redirect_url == "http://127.0.0.1:41234/console/oidc/callback"
    assert (config_path.parent / "console-client-secret").read_text().strip() == DEMO_CLIENT_SECRET
