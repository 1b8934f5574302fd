"""The demo's SMTP server: where the deployment's e-mail channel delivers, in the demo's own process.

An ``aiosmtpd`` server on a free loopback port; the packaged deployment names ``smtp_port =
8096``, which the runner points at it (:func:`point_mail_at`). Every message is kept, parsed.
"""

from __future__ import annotations

import re
import threading
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import default
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mcp_approval.hosts import unused_loopback_port

if TYPE_CHECKING:
    from aiosmtpd.controller import Controller

__all__ = ["MAIL_PORT_LINE", "MailInbox", "link_in", "point_mail_at"]

#: The packaged deployment's SMTP port line, which the runner rewrites.
MAIL_PORT_LINE = "smtp_port = 8096"


def point_mail_at(config_path: Path, port: int) -> None:
    """Make the materialized deployment's e-mail channel send to ``port`` on 127.0.0.1."""
    text = config_path.read_text(encoding="utf-8")
    config_path.write_text(text.replace(MAIL_PORT_LINE, f"smtp_port = {port}"), encoding="utf-8")


class MailInbox:
    """An SMTP server on 127.0.0.1 keeping every message it receives, in order."""

    def __init__(self) -> None:
        self.port = unused_loopback_port()
        self._lock = threading.Lock()
        self._messages: list[EmailMessage] = []
        self._controller: Controller | None = None

    def start(self) -> MailInbox:
        """Listen (in aiosmtpd's own thread)."""
        from aiosmtpd.controller import Controller

        inbox = self

        class Handler:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
                message = BytesParser(policy=default).parsebytes(envelope.content)
                if isinstance(message, EmailMessage):
                    with inbox._lock:
                        inbox._messages.append(message)
                return "250 OK"

        self._controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)
        self._controller.start()
        return self

    def text_to(self, address: str, containing: str) -> str:
        """The plain text of the latest message to ``address`` that contains ``containing`` (else empty)."""
        with self._lock:
            messages = [m for m in self._messages if str(m["To"]) == address]
        for message in reversed(messages):
            part = message.get_body(preferencelist=("plain",))
            text = str(part.get_content()) if part is not None else ""
            if containing in text:
                return text
        return ""

    def stop(self) -> None:
        """Stop listening."""
        if self._controller is not None:
            self._controller.stop()
            self._controller = None


def link_in(text: str, label: str) -> str:
    """The URL on the ``label: URL`` line of a message's text (else empty)."""
    found = re.search(rf"^{re.escape(label)}: (\S+)", text, re.MULTILINE)
    return found.group(1) if found else ""
