"""A small real HTTP reverse proxy on 127.0.0.1 that injects faults in front of a real server.

Every request is forwarded to ``target`` unchanged unless a queued :class:`Fault` matches it
(method and path prefix); a fault applies to its next ``count`` matching requests:

- ``status``: answer ``code`` (default 503) with ``body`` (default a short problem document) and
  ``content_type``, without forwarding;
- ``drop``: forward (the server acts on it), then close the connection without answering;
- ``garbage``: forward, then replace the body of the answer with bytes that are not JSON;
- ``slow``: wait ``delay_s`` before forwarding (an answer that arrives late but arrives);
- ``hang``: wait ``delay_s`` and close the connection without answering (a timeout);
- ``reset``: close the connection at once without answering.

It records every request (method, path, headers, body) so tests can check what the client sent.
"""

from __future__ import annotations

import http.client
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from mcp_approval.hosts import unused_loopback_port
from tests.support.timing import scaled

_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


@dataclass
class Fault:
    """One injected fault (see the module docstring)."""

    kind: str
    path: str = "/"
    method: str | None = None
    count: int = 1
    code: int = 503
    delay_s: float = 0.0
    body: bytes = b'{"title":"injected"}'
    content_type: str = "application/problem+json"

    def matches(self, method: str, path: str) -> bool:
        return self.count > 0 and path.startswith(self.path) and (self.method is None or self.method == method)


@dataclass
class Seen:
    """A request the proxy received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    fault: str | None = None
    #: The upstream answer's status, once the request was forwarded and answered.
    status: int | None = None


@dataclass
class FaultProxy:
    """The proxy; ``start()`` binds a free port and serves in a daemon thread.

    The port comes from :func:`~mcp_approval.hosts.unused_loopback_port`, like the servers': a port
    the system picks could be one already handed to a server that has not bound it yet.
    """

    target: str
    faults: list[Fault] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    port: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, port: int | None = None) -> FaultProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                return

            def _any(self) -> None:
                proxy._handle(self)

            do_GET = do_POST = do_DELETE = do_PUT = _any

        self._server = ThreadingHTTPServer(("127.0.0.1", port or unused_loopback_port()), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="fault-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def inject(self, fault: Fault) -> None:
        with self._lock:
            self.faults.append(fault)

    def clear(self) -> None:
        """Drop pending faults and forget the requests seen so far."""
        with self._lock:
            self.faults.clear()
            self.seen.clear()

    def requests(self, method: str | None = None, path: str = "/") -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.path.startswith(path) and (method is None or s.method == method)]

    def _take(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.matches(method, path):
                    fault.count -= 1
                    return fault
        return None

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        body = handler.rfile.read(length) if length else b""
        method, path = handler.command, handler.path
        fault = self._take(method, path)
        record = Seen(method, path, dict(handler.headers.items()), body, fault.kind if fault else None)
        with self._lock:
            self.seen.append(record)
        if fault is not None and fault.kind in ("hang", "reset"):
            time.sleep(fault.delay_s if fault.kind == "hang" else 0)
            handler.close_connection = True
            return
        if fault is not None and fault.kind == "status":
            _answer(handler, fault.code, {"content-type": fault.content_type}, fault.body)
            return
        if fault is not None and fault.kind == "slow":
            time.sleep(fault.delay_s)
        status, headers, payload = self._forward(method, path, dict(handler.headers.items()), body)
        record.status = status
        if fault is not None and fault.kind == "drop":
            handler.close_connection = True
            return
        if fault is not None and fault.kind == "garbage":
            payload = b"<html>not json{"
        _answer(handler, status, headers, payload)

    def _forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(self.target)
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=scaled(30))
        try:
            sent = {k: v for k, v in headers.items() if k.lower() not in _HOP_HEADERS}
            conn.request(method, path, body=body or None, headers=sent)
            response = conn.getresponse()
            payload = response.read()
            kept = {k: v for k, v in response.getheaders() if k.lower() not in _HOP_HEADERS}
            return response.status, kept, payload
        except OSError:
            return 502, {"content-type": "text/plain"}, b"upstream unreachable"
        finally:
            conn.close()


def _answer(handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str], payload: bytes) -> None:
    try:
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("content-length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)
    except OSError:
        handler.close_connection = True
