"""``kind = "email"`` options: what a deployment file may say, and the clear errors for what it may not."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from mcp_approval.backends import ApprovalTemplate
from mcp_approval.notify import EmailChannelOptions

BASE: dict[str, Any] = {
    "smtp_host": "smtp.example.com",
    "sender": "approvals@example.com",
    "reviewers": {"carol": "carol@example.com"},
}


def test_ports_follow_the_security_chosen() -> None:
    assert EmailChannelOptions(**BASE).port == 587
    assert EmailChannelOptions(**BASE, security="tls").port == 465
    assert EmailChannelOptions(**BASE, security="none").port == 25
    assert EmailChannelOptions(**BASE, smtp_port=2525).port == 2525


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"sender": "not an address"}, "sender: 'not an address' is not an e-mail address"),
        ({"sender": "a@example.com\r\nBcc: x@example.com"}, "sender: an address cannot contain line breaks"),
        ({"reviewers": {"carol": "carol@example.com\nBcc: x@example.com"}}, "reviewers.carol: an address cannot"),
        ({"reviewers": {}}, "at least 1 item"),
        ({"username": "approvals"}, "username and password_file go together"),
        ({"username": "a", "password_file": "p", "security": "none"}, "an SMTP login needs security"),
        ({"link_ttl_s": 0}, "greater than 0"),
        ({"security": "ssl"}, "'tls', 'starttls' or 'none'"),
    ],
)
def test_bad_options_are_refused_naming_the_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        EmailChannelOptions(**(BASE | change))


def test_a_high_risk_template_needs_sign_in_unless_it_says_otherwise() -> None:
    assert ApprovalTemplate().links_need_sign_in is False
    assert ApprovalTemplate(risk="high").links_need_sign_in is True
    assert ApprovalTemplate(risk="high", links_require_sign_in=False).links_need_sign_in is False
    assert ApprovalTemplate(links_require_sign_in=True).links_need_sign_in is True
    with pytest.raises(ValidationError, match="'normal' or 'high'"):
        ApprovalTemplate(risk="medium")  # type: ignore[arg-type]
