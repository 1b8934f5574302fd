"""Real local receivers of notifications: a Standard Webhooks HTTP endpoint, an SMTP server and a JSON endpoint."""

from __future__ import annotations

import json
import ssl
import threading
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import default
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import trustme
from aiosmtpd.controller import Controller
from standardwebhooks import Webhook, WebhookVerificationError

from mcp_approval.hosts import unused_loopback_port
from tests.support.timing import scaled

#: A signing secret for tests: ``whsec_`` + base64 of 32 bytes.
WEBHOOK_SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8GKYo="


@dataclass(frozen=True)
class Delivery:
    """One POST the receiver got.

    Attributes:
        webhook_id: its ``webhook-id`` header.
        body: the raw body.
        verified: whether the Standard Webhooks signature verified.
        accepted: whether the receiver answered 2xx.
    """

    webhook_id: str
    body: bytes
    verified: bool
    accepted: bool

    @property
    def payload(self) -> dict[str, Any]:
        return dict(json.loads(self.body))


@dataclass
class WebhookReceiver:
    """An HTTP server on 127.0.0.1 that verifies each POST's signature and records it.

    It refuses (503) the first ``refuse_first`` POSTs, and every POST while ``down`` is set. With
    ``hold`` given, each POST is recorded at once and answered only once ``hold`` is set.
    """

    secret: str = WEBHOOK_SECRET
    refuse_first: int = 0
    down: bool = False
    deliveries: list[Delivery] = field(default_factory=list)
    port: int = field(default_factory=unused_loopback_port)
    hold: threading.Event | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> WebhookReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {key.lower(): value for key, value in self.headers.items()}
                status = receiver.record(headers, body)
                if receiver.hold is not None:
                    receiver.hold.wait(scaled(30))
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def record(self, headers: dict[str, str], body: bytes) -> int:
        try:
            Webhook(self.secret).verify(body, headers)
            verified = True
        except WebhookVerificationError:
            verified = False
        with self._lock:
            refused = self.down or sum(1 for d in self.deliveries if not d.accepted) < self.refuse_first
            accepted = verified and not refused
            self.deliveries.append(Delivery(headers.get("webhook-id", ""), body, verified, accepted))
        if not verified:
            return 400
        return 204 if accepted else 503

    def accepted(self) -> list[Delivery]:
        with self._lock:
            return [d for d in self.deliveries if d.accepted]

    def all(self) -> list[Delivery]:
        with self._lock:
            return list(self.deliveries)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@dataclass
class SmtpReceiver:
    """A plain SMTP server on 127.0.0.1 (``aiosmtpd``) that keeps every message it receives."""

    port: int = field(default_factory=unused_loopback_port)
    messages: list[EmailMessage] = field(default_factory=list)

    def start(self) -> SmtpReceiver:
        receiver = self

        class Handler:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
                message = BytesParser(policy=default).parsebytes(envelope.content)
                assert isinstance(message, EmailMessage)
                receiver.messages.append(message)
                return "250 OK"

        self._controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)
        self._controller.start()
        return self

    def url(self, *, to: str = "reviewers@example.com") -> str:
        """An Apprise ``mailto://`` URL sending through this server, without TLS or login."""
        return f"mailto://approvals@example.com?smtp=127.0.0.1&port={self.port}&mode=insecure&to={to}"

    def texts(self) -> list[tuple[str, str]]:
        """Each message's subject and plain-text body."""
        found = []
        for message in list(self.messages):
            part = message.get_body(preferencelist=("plain",))
            found.append((str(message["subject"]), part.get_content() if part is not None else ""))
        return found

    def stop(self) -> None:
        self._controller.stop()


@dataclass
class JsonReceiver:
    """An HTTP(S) server on 127.0.0.1 that answers every POST ``200 ok`` and keeps its path and JSON body.

    With ``tls``, it serves HTTPS under a certificate of a throwaway CA (``trustme``), for services
    that only speak HTTPS (clients then skip verification: ``verify=no`` in an Apprise URL).
    """

    tls: bool = False
    port: int = field(default_factory=unused_loopback_port)
    posts: list[tuple[str, Any]] = field(default_factory=list)

    def start(self) -> JsonReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                receiver.posts.append((self.path, json.loads(body)))
                self.send_response(200)
                self.send_header("content-type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        if self.tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            trustme.CA().issue_cert("127.0.0.1").configure_cert(context)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
