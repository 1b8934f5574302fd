"""A deployment file whose reminders or escalations could never work is refused, naming the file and the field."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from mcp_approval.config import ConfigError, load_config
from mcp_approval.server.deployment import build_deployment
from tests.support.receivers import WEBHOOK_SECRET
from tests.support.treasury import deployment_dir

CHANNELS = {
    "team": {"kind": "webhook", "url": "http://127.0.0.1:9/team", "secret": WEBHOOK_SECRET},
    "leads": {"kind": "webhook", "url": "http://127.0.0.1:9/leads", "secret": WEBHOOK_SECRET},
}
GOOD = {"notify": ["team"], "remind_after_s": 600, "escalate_after_s": 1800, "escalate_to": "admin"}


def load(tmp_path: Path, treasury: dict[str, Any], **approval: Any) -> None:
    overrides: dict[str, Any] = {"notifications": {"channels": CHANNELS}, "templates": {"treasury": treasury}}
    if approval:
        overrides["approval"] = approval
    load_config(deployment_dir(tmp_path, overrides) / "config.toml")


def test_a_template_that_reminds_and_escalates_loads(tmp_path: Path) -> None:
    load(tmp_path, GOOD | {"escalate_notify": ["leads"], "escalation_may_decide": True})


@pytest.mark.parametrize(
    ("treasury", "message"),
    [
        (
            {"notify": ["team"], "escalate_after_s": 600},
            r"templates\.treasury: escalate_after_s and escalate_to go together",
        ),
        ({"notify": ["team"], "escalate_to": "admin"}, r"templates\.treasury: escalate_to needs escalate_after_s"),
        (GOOD | {"escalate_to": "auditors"}, r"templates\.treasury\.escalate_to: no \[\[principals\]\] entry holds"),
        (GOOD | {"escalate_to": "approver"}, r"escalate_to must name another role than reviewer_role \('approver'\)"),
        (GOOD | {"escalate_notify": ["nowhere"]}, r"templates\.treasury\.escalate_notify: no channel 'nowhere'"),
        ({"remind_after_s": 60}, r"remind_after_s needs notify"),
        (GOOD | {"remind_after_s": 1800}, r"remind_after_s \(1800\) must come before escalate_after_s \(1800\)"),
        ({"notify": ["team"], "escalation_may_decide": True}, r"escalation_may_decide need escalate_to"),
        (GOOD | {"remind_after_s": 0}, r"templates\.treasury\.remind_after_s: Input should be greater than 0"),
    ],
)
def test_a_template_whose_steps_cannot_work_is_refused(tmp_path: Path, treasury: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        load(tmp_path, treasury)
    assert "config.toml" in str(caught.value)


def test_a_reminder_at_or_after_the_deadline_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"templates\.treasury\.remind_after_s: 600 s is not before") as caught:
        load(tmp_path, GOOD, default_deadline_s=600)
    assert "approval.default_deadline_s (600 s)" in str(caught.value)
    with pytest.raises(ConfigError, match=r"templates\.treasury\.escalate_after_s: 1800 s is not before"):
        load(tmp_path, GOOD, default_deadline_s=1000)


def test_the_documented_reminders_configure_a_deployment(tmp_path: Path) -> None:
    """docs/reviewers.md's "Nobody forgotten" block, merged into the treasury example, starts a deployment."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "reviewers.md").read_text(encoding="utf-8")
    section = page[page.index("## Nobody forgotten") :]
    section = section[: section.index("\n## ")]
    (block,) = re.findall(r"```toml\n(.*?)```", section, re.DOTALL)
    documented = tomllib.loads(block)
    example = tomllib.loads((deployment_dir(tmp_path / "plain") / "config.toml").read_text())
    templates = example["templates"]
    templates["treasury"] |= documented["templates"]["treasury"]
    overrides = {"notifications": documented["notifications"], "templates": templates}
    config = load_config(deployment_dir(tmp_path, overrides) / "config.toml")
    treasury = config.templates["treasury"]
    assert (treasury.remind_after_s, treasury.escalate_after_s, treasury.escalate_to) == (3600, 14400, "admin")
    assert treasury.escalation_channels() == ["leads-hook"]
    outbox = build_deployment(config, base_url="http://127.0.0.1:1").approvals.outbox
    assert outbox is not None
    assert [history.name for history in outbox.migrations] == ["reminders"]


def test_an_escalation_role_only_the_identity_provider_grants_is_accepted(tmp_path: Path) -> None:
    """Reviewers signed in with ``[console.oidc]`` hold the roles of their tokens' claim, unknown to the file."""
    oidc = {
        "issuer": "https://login.example.com/realms/acme",
        "client_id": "mcp-approval-console",
        "redirect_url": "https://approvals.example.com/console/oidc/callback",
    }
    overrides: dict[str, Any] = {
        "notifications": {"channels": CHANNELS},
        "templates": {"treasury": GOOD | {"escalate_to": "treasury-leads"}},
        "console": {"oidc": oidc},
    }
    config = load_config(deployment_dir(tmp_path, overrides) / "config.toml")
    assert config.templates["treasury"].escalate_to == "treasury-leads"
