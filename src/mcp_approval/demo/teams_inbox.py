"""The demo's stand-in for a Microsoft Teams workflow: where the deployment's Adaptive Cards arrive.

It listens on a free loopback port in the demo's own process; the packaged deployment names
:data:`TEAMS_ADDRESS`, which the runner points at it. Each POST's JSON body (a message activity
with one Adaptive Card attachment, as a workflow's HTTP trigger takes it) is kept, with the
query string that carries the workflow's ``sig``.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mcp_approval.hosts import unused_loopback_port

__all__ = ["TEAMS_ADDRESS", "WorkflowInbox", "card_lines"]

#: The address the packaged deployment's Teams channel names.
TEAMS_ADDRESS = "127.0.0.1:8097"


class WorkflowInbox:
    """An HTTP receiver on 127.0.0.1 keeping every card posted to it, in order."""

    def __init__(self) -> None:
        self.port = unused_loopback_port()
        self._lock = threading.Lock()
        self._cards: list[dict[str, Any]] = []
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> WorkflowInbox:
        """Listen in a background thread."""
        inbox = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                message = json.loads(body)
                with inbox._lock:
                    inbox._cards.append(message["attachments"][0]["content"])
                self.send_response(202)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, name="demo-teams", daemon=True).start()
        return self

    def cards(self, link_suffix: str | None = None) -> list[dict[str, Any]]:
        """The cards kept so far (those whose button link ends with ``link_suffix``, if given)."""
        with self._lock:
            cards = list(self._cards)
        if link_suffix is None:
            return cards
        return [c for c in cards if any(a.get("url", "").endswith(link_suffix) for a in c.get("actions", []))]

    def stop(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def card_lines(card: dict[str, Any]) -> list[str]:
    """A card's lines as Teams shows them."""
    return ["".join(run.get("text", "") for run in block.get("inlines", [])) for block in card.get("body", [])]
