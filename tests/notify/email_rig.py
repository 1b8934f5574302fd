"""A treasury deployment with a ``kind = "email"`` channel sending through a real SMTP server on 127.0.0.1.

The SMTP server is ``aiosmtpd`` (:class:`tests.support.receivers.SmtpReceiver`); the server is a
real ``serve``; reviewers' browsers are ``httpx`` clients that keep cookies (or Chromium).
"""

from __future__ import annotations

import re
import ssl
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import default
from pathlib import Path
from typing import Any

import httpx
import trustme
from aiosmtpd.controller import Controller

from mcp_approval.hosts import unused_loopback_port
from tests.support.polling import eventually
from tests.support.receivers import SmtpReceiver
from tests.support.timing import scaled
from tests.support.treasury import deployment_dir

__all__ = [
    "ADDRESSES",
    "Links",
    "email_deployment",
    "form_csrf",
    "html_of",
    "links_of",
    "mail_to",
    "post_form",
    "sign_in",
]

#: The channel's reviewers: two approvers, the requester, and an admin who is no approver.
ADDRESSES = {
    "carol": "carol@example.com",
    "dave": "dave@example.com",
    "alice": "alice@example.com",
    "erin": "erin@example.com",
}


def email_deployment(
    tmp_path: Path,
    smtp: SmtpReceiver | SmtpServer,
    *,
    templates: dict[str, dict[str, Any]] | None = None,
    **channel: Any,
) -> Path:
    """The treasury example telling the ``mail`` channel about its ``treasury`` and ``close_quarter`` requests."""
    options = {
        "kind": "email",
        "smtp_host": "127.0.0.1",
        "smtp_port": smtp.port,
        "security": "none",
        "sender": "Approvals <approvals@example.com>",
        "reviewers": dict(ADDRESSES),
        **channel,
    }
    notifications = {"channels": {"mail": options}, "poll_interval_s": 0.05, "retry_initial_s": 0.05}
    notifications |= {"retry_max_s": 0.2, "lease_s": scaled(5.0), "timeout_s": scaled(2.0)}
    chosen = {
        "treasury": {"approvals_required": 1, "reviewer_role": "approver", "notify": ["mail"]},
        "close_quarter": {"approvals_required": 2, "reviewer_role": "approver", "notify": ["mail"]},
    }
    for name, extra in (templates or {}).items():
        chosen[name] = {**chosen.get(name, {}), **extra}
    return deployment_dir(tmp_path, {"notifications": notifications, "templates": chosen})


async def mail_to(smtp: SmtpReceiver | SmtpServer, address: str, request_id: str | None = None) -> EmailMessage:
    """The message ``address`` got (about ``request_id``, when given), once it arrived (waits)."""

    async def look() -> list[EmailMessage]:
        return [m for m in list(smtp.messages) if m["To"] == address and (request_id is None or request_id in _text(m))]

    found = await eventually(look, bool, timeout_s=scaled(20))
    return found[-1]


class Links:
    """A reviewer's two links, as their message's plain text gives them."""

    def __init__(self, approve: str, deny: str) -> None:
        self.approve = approve
        self.deny = deny


def links_of(message: EmailMessage) -> Links:
    """The Approve and Deny links of ``message``."""
    text = _text(message)
    approve = re.search(r"^Approve: (\S+)", text, re.MULTILINE)
    deny = re.search(r"^Deny: (\S+)", text, re.MULTILINE)
    assert approve is not None, text
    assert deny is not None, text
    return Links(approve.group(1), deny.group(1))


def html_of(message: EmailMessage) -> str:
    """The message's HTML part."""
    part = message.get_body(preferencelist=("html",))
    assert part is not None
    return str(part.get_content())


def _text(message: EmailMessage) -> str:
    part = message.get_body(preferencelist=("plain",))
    return str(part.get_content()) if part is not None else ""


def form_csrf(page: str) -> str:
    """The CSRF token of the confirmation page's form."""
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None, page
    return found.group(1)


async def post_form(browser: httpx.AsyncClient, url: str, **fields: str) -> httpx.Response:
    """POST ``fields`` as the confirmation page's form does."""
    return await browser.post(url, data=fields, headers={"content-type": "application/x-www-form-urlencoded"})


async def sign_in(browser: httpx.AsyncClient, token: str) -> None:
    """Sign ``browser`` in to the console with a bearer token (its session cookie is kept)."""
    response = await browser.post("/console/login", data={"token": token})
    assert response.status_code == 303, response.text


class SmtpServer:
    """An ``aiosmtpd`` server on 127.0.0.1 that keeps what it accepts; it can refuse a recipient's
    first message (451, as a busy server does) and require STARTTLS under a throwaway CA's certificate."""

    def __init__(self, *, refuse_first_to: frozenset[str] = frozenset(), ca_file: Path | None = None) -> None:
        self.port = unused_loopback_port()
        self.messages: list[EmailMessage] = []
        self.refused: list[str] = []
        self._refuse = set(refuse_first_to)
        self._ca_file = ca_file
        self._controller: Controller | None = None

    def start(self) -> SmtpServer:
        server = self

        class Handler:
            async def handle_DATA(self, smtp: Any, session: Any, envelope: Any) -> str:
                (to,) = envelope.rcpt_tos
                if to in server._refuse:
                    server._refuse.discard(to)
                    server.refused.append(to)
                    return "451 4.3.0 try again later"
                message = BytesParser(policy=default).parsebytes(envelope.content)
                assert isinstance(message, EmailMessage)
                server.messages.append(message)
                return "250 OK"

        tls: dict[str, Any] = {}
        if self._ca_file is not None:
            ca = trustme.CA()
            ca.cert_pem.write_to_path(str(self._ca_file))
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ca.issue_cert("127.0.0.1").configure_cert(context)
            tls = {"tls_context": context, "require_starttls": True}
        self._controller = Controller(Handler(), hostname="127.0.0.1", port=self.port, **tls)
        self._controller.start()
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
