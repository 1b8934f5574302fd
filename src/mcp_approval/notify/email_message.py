"""One reviewer's e-mail about one request: the request's facts, and that reviewer's own links.

The message is ``multipart/alternative``: the same lines as plain text and as HTML. The facts are
:meth:`~mcp_approval.notify.messages.Notification.facts` (each caller-chosen value kept on its
line and cut); the HTML escapes every one of them, so nothing a caller sent becomes a tag, a
link or an image. The only links are the request's own: this reviewer's Approve and Deny links
and the request's console page.
"""

from __future__ import annotations

from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Final

from markupsafe import escape

from mcp_approval.notify.messages import Notification

__all__ = ["LINK_PATH", "DecisionLinks", "decision_message", "link_url"]

#: Where a link's confirmation page is: ``{token}``, then ``approve`` or ``deny``.
LINK_PATH: Final = "/console/email/{token}/{decision}"
_BUTTON = (
    "display:inline-block;padding:10px 18px;margin:4px 8px 4px 0;border-radius:6px;"
    "color:#ffffff;text-decoration:none;font-weight:bold;background:{colour}"
)


def link_url(base_url: str, token: str, decision: str) -> str:
    """The link to ``token``'s confirmation page for ``decision`` under ``base_url``."""
    return base_url.rstrip("/") + LINK_PATH.format(token=token, decision=decision)


class DecisionLinks:
    """A reviewer's two links (``None``: the message carries none, e.g. an altered request)."""

    def __init__(self, base_url: str, token: str) -> None:
        self.approve = link_url(base_url, token, "approve")
        self.deny = link_url(base_url, token, "deny")


def decision_message(
    notification: Notification,
    *,
    sender: str,
    to: str,
    reviewer: str,
    links: DecisionLinks | None,
    expires_at: str | None,
) -> EmailMessage:
    """The message to ``reviewer`` at ``to`` about ``notification``'s request."""
    message = EmailMessage()
    message["Subject"] = notification.title()
    message["From"] = sender
    message["To"] = to
    message["Date"] = formatdate(notification.at / 1000, usegmt=True)
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2].strip(">") or None)
    message["Auto-Submitted"] = "auto-generated"
    message.set_content(_text(notification, reviewer, links, expires_at))
    message.add_alternative(_html(notification, reviewer, links, expires_at), subtype="html")
    return message


def _text(notification: Notification, reviewer: str, links: DecisionLinks | None, expires_at: str | None) -> str:
    lines = [notification.title(), "", *(f"{label}: {value}" for label, value in notification.facts()), ""]
    if links is not None:
        lines += [
            f"Your links, {reviewer} (each opens a page where you confirm; only you may use them, once):",
            f"Approve: {links.approve}",
            f"Deny: {links.deny}",
        ]
        if expires_at:
            lines.append(f"They work until {expires_at}.")
    else:
        lines.append("Decide it in the console.")
    console = notification.link()
    if console:
        lines += ["", f"The request in the console: {console}"]
    return "\n".join(lines) + "\n"


def _html(notification: Notification, reviewer: str, links: DecisionLinks | None, expires_at: str | None) -> str:
    parts = [f"<h2>{escape(notification.title())}</h2>"]
    parts += [f"<div><b>{escape(label)}:</b> {escape(value)}</div>" for label, value in notification.facts()]
    if links is not None:
        approve = _BUTTON.format(colour="#1a7f37")
        deny = _BUTTON.format(colour="#cf222e")
        parts.append(
            f"<p>Your links, {escape(reviewer)}: each opens a page where you confirm; only you may use them, once.</p>"
        )
        parts.append(
            f'<p><a href="{escape(links.approve)}" style="{approve}">Approve…</a>'
            f'<a href="{escape(links.deny)}" style="{deny}">Deny…</a></p>'
        )
        if expires_at:
            parts.append(f"<p><small>They work until {escape(expires_at)}.</small></p>")
    else:
        parts.append("<p>Decide it in the console.</p>")
    console = notification.link()
    if console:
        parts.append(f'<p><a href="{escape(console)}">The request in the console</a></p>')
    head = '<!DOCTYPE html><html><head><meta charset="utf-8"></head>'
    return f'{head}<body style="overflow-wrap: anywhere">{"".join(parts)}</body></html>'
