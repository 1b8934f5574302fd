"""The demo's webhook receiver: where the deployment's notifications arrive, signatures verified.

It listens on a free loopback port in the demo's own process; the packaged deployment names
:data:`WEBHOOK_ADDRESS`, which the runner points at it. Every POST is checked with the
``standardwebhooks`` package against :data:`DEMO_WEBHOOK_SECRET` (the packaged channel's secret)
before it is kept; a repeated ``webhook-id`` is acknowledged and not kept twice.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook, WebhookVerificationError

from mcp_approval.hosts import unused_loopback_port

__all__ = ["DEMO_WEBHOOK_SECRET", "WEBHOOK_ADDRESS", "ReceivedMessage", "WebhookInbox", "pretty"]

#: The address the packaged deployment's webhook channel names.
WEBHOOK_ADDRESS = "127.0.0.1:8099"
#: The packaged channel's signing secret (a demo value, like the demo's static tokens).
DEMO_WEBHOOK_SECRET = "whsec_ZGVtby13ZWJob29rLXNlY3JldC0zMi1ieXRlcyE="  # noqa: S105 (demo-only, as in config.toml)


@dataclass(frozen=True)
class ReceivedMessage:
    """One verified notification.

    Attributes:
        webhook_id: its ``webhook-id`` (the same on every delivery of the same event).
        type: the notification type (``approval.requested``, ...).
        data: its content.
        body: the JSON text as received.
    """

    webhook_id: str
    type: str
    data: dict[str, Any]
    body: str


class WebhookInbox:
    """An HTTP receiver on 127.0.0.1 keeping each verified notification once."""

    def __init__(self, secret: str = DEMO_WEBHOOK_SECRET) -> None:
        self._verifier = Webhook(secret)
        self.port = unused_loopback_port()
        self._lock = threading.Lock()
        self._messages: list[ReceivedMessage] = []
        self.refused = 0
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> WebhookInbox:
        """Listen in a background thread."""
        inbox = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                status = inbox.receive(body, {key.lower(): value for key, value in self.headers.items()})
                self.send_response(status)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, name="demo-webhooks", daemon=True).start()
        return self

    def receive(self, body: bytes, headers: dict[str, str]) -> int:
        """Verify and keep one POST; the HTTP status to answer."""
        try:
            payload = self._verifier.verify(body, headers)
        except WebhookVerificationError:
            with self._lock:
                self.refused += 1
            return 400
        message = ReceivedMessage(headers["webhook-id"], payload["type"], dict(payload["data"]), body.decode())
        with self._lock:
            if all(kept.webhook_id != message.webhook_id for kept in self._messages):
                self._messages.append(message)
        return 204

    def messages(self, request_id: str | None = None) -> list[ReceivedMessage]:
        """The messages kept so far (about ``request_id``, if given), in arrival order."""
        with self._lock:
            return [m for m in self._messages if request_id is None or m.data.get("request_id") == request_id]

    def stop(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def pretty(message: ReceivedMessage) -> str:
    """The message's JSON, indented, for the narration."""
    return json.dumps({"type": message.type, "data": message.data}, indent=2, ensure_ascii=False)
