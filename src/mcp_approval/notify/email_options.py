"""``kind = "email"``: each reviewer's own e-mail, with Approve and Deny links that decide safely.

::

    [notifications.channels.approvers-mail]
    kind = "email"
    smtp_host = "smtp.example.com"
    smtp_port = 587                        # the default for "starttls" (465 for "tls", 25 for "none")
    security = "starttls"                  # "tls" (implicit TLS), "starttls", or "none" (a local relay)
    username = "approvals@example.com"     # optional; a login needs TLS
    password_file = "smtp-password"        # read when the server starts (relative: to the deployment file)
    sender = "Approvals <approvals@example.com>"
    reviewers = { carol = "carol@example.com", dave = "dave@example.com" }
    link_ttl_s = 259200                    # a link lives at most this long (and never past its request)

How the links decide (a page first, single-use, hash-only tokens bound to the reviewer and the
request's sealed content) is :mod:`mcp_approval.notify.email_pages`.
"""

from __future__ import annotations

from email.headerregistry import Address
from email.utils import parseaddr
from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["DEFAULT_LINK_TTL_S", "EmailChannelOptions"]

#: A link lives at most three days, however long its request may wait.
DEFAULT_LINK_TTL_S = 72 * 3600.0
_DEFAULT_PORTS = {"tls": 465, "starttls": 587, "none": 25}


def _address(text: str, *, setting: str) -> str:
    """``text`` when it is one plain e-mail address (a display name allowed); a ValueError otherwise."""
    if any(ch in text for ch in "\r\n\x00"):
        raise ValueError(f"{setting}: an address cannot contain line breaks")
    _name, address = parseaddr(text)
    local, at, domain = address.partition("@")
    if not (local and at and domain) or any(ch.isspace() for ch in address):
        raise ValueError(f"{setting}: {text!r} is not an e-mail address")
    try:
        Address(addr_spec=address)
    except (ValueError, IndexError) as exc:
        raise ValueError(f"{setting}: {text!r} is not an e-mail address ({exc})") from None
    return text


class EmailChannelOptions(BaseModel):
    """``kind = "email"``: one message per eligible reviewer, sent through an SMTP server.

    Only reviewers listed in ``reviewers`` are written to, and only about requests they may
    decide (the template's role, never their own request). Each message carries that reviewer's
    own Approve and Deny links; opening one shows a confirmation page, and only the button on
    that page decides. Links point at ``[notifications] console_url`` (``serve``: the server's
    ``base_url``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Always ``"email"``.
    kind: Literal["email"] = "email"
    #: The SMTP server's host name.
    smtp_host: str = Field(min_length=1, max_length=255)
    #: Its port (by default 465 for ``tls``, 587 for ``starttls``, 25 for ``none``).
    smtp_port: int | None = Field(default=None, ge=1, le=65535)
    #: ``tls`` (TLS from the first byte), ``starttls`` (upgraded, required), or ``none`` (a relay on
    #: the host or a trusted network: no encryption, so no login).
    security: Literal["tls", "starttls", "none"] = "starttls"
    #: The SMTP login, if the server wants one (with ``password_file``).
    username: str | None = None
    #: A file holding the SMTP password (never in the deployment file itself).
    password_file: Path | None = None
    #: The ``From`` address (a display name allowed: ``Approvals <approvals@example.com>``).
    sender: str
    #: Reviewer id -> their e-mail address. Only these reviewers get messages.
    reviewers: dict[str, str] = Field(min_length=1)
    #: The longest a link lives, in seconds; it never outlives its request's deadline.
    link_ttl_s: float = Field(default=DEFAULT_LINK_TTL_S, gt=0)

    @field_validator("sender")
    @classmethod
    def _sender(cls, sender: str) -> str:
        return _address(sender, setting="sender")

    @field_validator("reviewers")
    @classmethod
    def _reviewers(cls, reviewers: dict[str, str]) -> dict[str, str]:
        for reviewer, address in reviewers.items():
            if not reviewer or len(reviewer) > 200:
                raise ValueError(f"a reviewer id must have 1 to 200 characters, not {reviewer!r}")
            _address(address, setting=f"reviewers.{reviewer}")
        return reviewers

    @model_validator(mode="after")
    def _login_needs_tls(self) -> Self:
        if (self.username is None) != (self.password_file is None):
            raise ValueError("username and password_file go together (an SMTP login needs both)")
        if self.username is not None and self.security == "none":
            raise ValueError('an SMTP login needs security = "tls" or "starttls": the password would travel in clear')
        return self

    @property
    def port(self) -> int:
        """The SMTP port: ``smtp_port``, else the usual one for ``security``."""
        return self.smtp_port if self.smtp_port is not None else _DEFAULT_PORTS[self.security]
