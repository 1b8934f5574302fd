"""``kind = "email"``: each eligible reviewer's own message, with links that decide safely, over SMTP.

When a request opens, every reviewer in the channel's ``reviewers`` who may decide it (the
template's role, not its requester) gets a message of their own
(:func:`~mcp_approval.notify.email_message.decision_message`) carrying an Approve and a Deny
link bound to them, the request and its content
(:class:`~mcp_approval.notify.email_links.EmailLinks`). What a link does when opened is
:mod:`mcp_approval.notify.email_pages`. When the request ends (approved, denied, expired,
cancelled), its links end too. The other events send nothing: a reviewer's inbox gets one
message per request.

Messages go through the configured SMTP server with Python's ``smtplib`` (in a thread): TLS
from the first byte, STARTTLS (required, certificate checked), or none for a local relay.
"""

from __future__ import annotations

import asyncio
import smtplib
import ssl
from email.message import EmailMessage
from pathlib import Path

from mcp_approval.backends import ApprovalRecord, SupportsReview
from mcp_approval.backends.capabilities import SupportsSealedRequests
from mcp_approval.backends.contract import RequestIntegrityError, UnknownRequestError
from mcp_approval.clock import Clock, SystemClock
from mcp_approval.keyring import warn_if_readable_by_others
from mcp_approval.notify.delivery_error import DeliveryError
from mcp_approval.notify.email_links import EmailLinks, content_digest
from mcp_approval.notify.email_message import DecisionLinks, decision_message
from mcp_approval.notify.email_options import EmailChannelOptions
from mcp_approval.notify.messages import Notification
from mcp_approval.reviewers.views import timestamp

__all__ = ["EmailChannel", "sealed_digest"]

#: The notifications that end a request's links.
_ENDINGS = frozenset({"approval.approved", "approval.denied", "approval.expired", "approval.cancelled"})


async def sealed_digest(backend: SupportsReview, record: ApprovalRecord) -> str | None:
    """:func:`~mcp_approval.notify.email_links.content_digest` of ``record``, with the backend's
    sealed call digest when it seals; ``None`` when the stored request fails its seals."""
    if record.integrity_failure is not None:
        return None
    call_digest: str | None = None
    if isinstance(backend, SupportsSealedRequests):
        try:
            sealed = await backend.sealed_request(record.id)
        except (RequestIntegrityError, UnknownRequestError):
            return None
        call_digest = sealed.call_digest if sealed is not None else None
    return content_digest(record, call_digest)


class EmailChannel:
    """Writes to each eligible reviewer of a request, through one SMTP server.

    Args:
        name: the channel's name (links are bound to it).
        options: the channel's options.
        timeout_s: the longest one SMTP exchange may take.
        backend: the requests (``None``: the channel only sends texts, as for audit anchors).
        links: where the links are stored (``None`` likewise).
        base_url: the console's public base URL, which links point at.
        clock: the source of time.

    Raises:
        ValueError: ``password_file`` cannot be read.
    """

    def __init__(
        self,
        name: str,
        options: EmailChannelOptions,
        *,
        timeout_s: float,
        backend: SupportsReview | None = None,
        links: EmailLinks | None = None,
        base_url: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._name = name
        self._options = options
        self._timeout_s = timeout_s
        self._backend = backend
        self._links = links
        self._base_url = base_url
        self._clock = clock or SystemClock()
        self._password: str | None = None
        if options.password_file is not None:
            self._password = _read_password(options.password_file)

    async def send(self, notification: Notification) -> None:
        """Write to the request's reviewers when it opens; end its links when it ends."""
        if self._backend is None or self._links is None or self._base_url is None:
            raise DeliveryError("this e-mail channel was built to send texts only")
        if notification.type in _ENDINGS:
            await self._links.retire(notification.request_id, self._clock.now_ms())
        elif notification.type == "approval.requested":
            await self._write_to_reviewers(notification, self._backend, self._links, self._base_url)

    async def _write_to_reviewers(
        self, notification: Notification, backend: SupportsReview, links: EmailLinks, base_url: str
    ) -> None:
        record = await backend.get_request(notification.request_id)
        if record is None or record.status.terminal:
            return
        now = self._clock.now_ms()
        expires = now + int(self._options.link_ttl_s * 1000)
        if record.expires_at is not None:
            expires = min(expires, record.expires_at)
        if expires <= now:
            return
        digest = await sealed_digest(backend, record)
        failed: list[str] = []
        for reviewer, address in self._options.reviewers.items():
            if backend.why_ineligible(reviewer, record) is not None:
                continue
            token: str | None = None
            if digest is not None:  # an altered request gets a message without links
                token = await links.issue(self._name, record.id, reviewer, digest, now, expires)
                if token is None:
                    continue  # written to already (this is a retry)
            shown = DecisionLinks(base_url, token) if token is not None else None
            message = decision_message(
                notification,
                sender=self._options.sender,
                to=address,
                reviewer=reviewer,
                links=shown,
                expires_at=timestamp(expires) if token is not None else None,
            )
            try:
                await self._deliver(message, address)
            except DeliveryError as exc:
                failed.append(f"{reviewer}: {exc}")
                continue
            if token is not None:
                await links.sent(token, self._clock.now_ms())
        if failed:
            raise DeliveryError("; ".join(failed))

    async def send_text(self, title: str, text: str) -> None:
        """Send ``title`` and ``text`` as plain text to every reviewer of the channel."""
        for address in self._options.reviewers.values():
            message = EmailMessage()
            message["Subject"] = " ".join(title.split())
            message["From"] = self._options.sender
            message["To"] = address
            message["Auto-Submitted"] = "auto-generated"
            message.set_content(text)
            await self._deliver(message, address)

    async def _deliver(self, message: EmailMessage, address: str) -> None:
        try:
            await asyncio.to_thread(self._smtp_send, message, address)
        except (smtplib.SMTPException, OSError, ssl.SSLError) as exc:
            raise DeliveryError(f"the SMTP server did not take the message ({type(exc).__name__})") from None

    def _smtp_send(self, message: EmailMessage, address: str) -> None:
        options = self._options
        context = ssl.create_default_context()
        smtp: smtplib.SMTP
        if options.security == "tls":
            smtp = smtplib.SMTP_SSL(options.smtp_host, options.port, timeout=self._timeout_s, context=context)
        else:
            smtp = smtplib.SMTP(options.smtp_host, options.port, timeout=self._timeout_s)
        with smtp:
            if options.security == "starttls":
                smtp.starttls(context=context)  # raises unless the server offers it: never falls back to clear
            if options.username is not None and self._password is not None:
                smtp.login(options.username, self._password)
            smtp.send_message(message, to_addrs=[address])

    async def aclose(self) -> None:
        """Nothing to release (a connection per message)."""


def _read_password(path: Path) -> str:
    """The password in ``path`` (surrounding whitespace removed); a readable-by-others file is warned about."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"password_file: cannot read {path} ({type(exc).__name__})") from None
    if not text:
        raise ValueError(f"password_file: {path} is empty")
    warn_if_readable_by_others(path, setting="password_file")
    return text
