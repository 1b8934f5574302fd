"""Receiving the OAuth redirect in a native or command-line agent (RFC 8252, loopback interface).

::

    with LoopbackRedirectReceiver(open_browser=open_in_browser) as receiver:
        auth = oauth_client(url, receiver=receiver, client_metadata_url=CLIENT_ID)
        async with mcp_client(url, auth=auth) as client:
            ...

The receiver listens on ``127.0.0.1`` from construction (so its redirect URI has its port), and
answers one redirect per authorization: it checks the ``state`` against the one in the
authorization URL it sent the user to, returns the ``code`` (and the RFC 9207 ``iss``) to the
SDK's flow, which holds the PKCE verifier, and shows the user a page saying they can close it.
A request with another ``state`` (a stale tab, another program on the machine) is answered
``400`` and ignored: the receiver keeps waiting for the right one. Each connection gets
``connection_timeout_s`` to send its request, so an idle connection cannot hold the receiver.
"""

from __future__ import annotations

import inspect
import socket
import sys
import time
import webbrowser
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from urllib.parse import parse_qs, urlsplit

import anyio.to_thread
from mcp.shared.auth import AuthorizationCodeResult

from mcp_approval.errors import MCPApprovalError

__all__ = [
    "DEFAULT_CONNECTION_TIMEOUT_S",
    "AuthorizationResponseError",
    "BrowserOpener",
    "LoopbackRedirectReceiver",
    "open_in_browser",
]

BrowserOpener = Callable[[str], Awaitable[None] | None]
"""Shows the user the authorization URL; returns once shown, without waiting for the user."""

_MAX_REQUEST_BYTES = 16_384
#: How long one connection may take to send its request line and headers (a browser sends them at once).
DEFAULT_CONNECTION_TIMEOUT_S = 5.0
_DONE_PAGE = b"<!doctype html><title>Signed in</title><p>Authorization received. You can close this window.</p>"


class AuthorizationResponseError(MCPApprovalError):
    """The redirect carried an OAuth error or no ``code``; ``error`` names which."""

    def __init__(self, error: str, description: str = "") -> None:
        super().__init__(f"{error}: {description}" if description else error)
        self.error = error
        self.description = description


def open_in_browser(url: str) -> None:
    """Open ``url`` in the user's browser, or print it when no browser can be started."""
    if not webbrowser.open(url):
        print(f"Open this URL to authorize the agent:\n{url}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class _Request:
    path: str
    query: dict[str, list[str]]


class LoopbackRedirectReceiver:
    """A listener on ``127.0.0.1`` that receives one authorization response per authorization.

    Args:
        port: the port to listen on; ``0`` (the default) takes a free one. A client whose
            redirect URI is fixed (in a client ID metadata document) needs a fixed port.
        path: the redirect URI's path.
        open_browser: shows the user the authorization URL (:func:`open_in_browser` by default).
        timeout_s: how long to wait for the user to come back, in all.
        connection_timeout_s: how long one connection may take to send its request before it is
            closed and the receiver waits for the next one.
    """

    def __init__(
        self,
        *,
        port: int = 0,
        path: str = "/callback",
        open_browser: BrowserOpener = open_in_browser,
        timeout_s: float = 300.0,
        connection_timeout_s: float = DEFAULT_CONNECTION_TIMEOUT_S,
    ) -> None:
        if not path.startswith("/"):
            raise ValueError(f"path {path!r} must start with '/'")
        if timeout_s <= 0 or connection_timeout_s <= 0:
            raise ValueError(
                f"timeout_s and connection_timeout_s must be positive; got {timeout_s} and {connection_timeout_s}"
            )
        self.path = path
        self.open_browser = open_browser
        self.timeout_s = timeout_s
        self.connection_timeout_s = connection_timeout_s
        self._expected_state: str | None = None
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", port))
        self._socket.listen(8)
        self._port: int = self._socket.getsockname()[1]

    @property
    def redirect_uri(self) -> str:
        """``http://127.0.0.1:<port><path>``: register this (RFC 8252 §7.3)."""
        return f"http://127.0.0.1:{self._port}{self.path}"

    async def redirect_handler(self, authorization_url: str) -> None:
        """Remember the URL's ``state`` and show the user the URL (the SDK's ``redirect_handler``)."""
        states = parse_qs(urlsplit(authorization_url).query).get("state")
        if not states:
            raise AuthorizationResponseError("invalid_request", "the authorization URL carries no state")
        self._expected_state = states[0]
        shown = self.open_browser(authorization_url)
        if inspect.isawaitable(shown):
            await shown

    async def callback_handler(self) -> AuthorizationCodeResult:
        """Wait for the redirect and return its code (the SDK's ``callback_handler``).

        A request with another ``state`` is answered ``400`` and ignored, and the wait goes on.

        Raises:
            AuthorizationResponseError: the response with the expected ``state`` is an error or
                has no ``code``.
            TimeoutError: nobody came back within ``timeout_s``.
        """
        expected, self._expected_state = self._expected_state, None
        if expected is None:
            raise AuthorizationResponseError("invalid_request", "no authorization was started")
        return await anyio.to_thread.run_sync(self._receive, expected, abandon_on_cancel=True)

    def close(self) -> None:
        """Stop listening."""
        self._socket.close()

    def __enter__(self) -> LoopbackRedirectReceiver:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def _receive(self, expected_state: str) -> AuthorizationCodeResult:
        deadline = time.monotonic() + self.timeout_s
        while True:
            self._socket.settimeout(_remaining(deadline))
            connection, _ = self._socket.accept()
            with connection:
                connection.settimeout(min(self.connection_timeout_s, _remaining(deadline)))
                result = self._answer(connection, expected_state)
            if result is not None:
                return result

    def _answer(self, connection: socket.socket, expected_state: str) -> AuthorizationCodeResult | None:
        """The authorization result ``connection`` brought, or ``None`` to keep waiting."""
        try:
            request = _read_request(connection)
        except OSError:  # an idle connection (timed out) or one that went away: take the next one
            return None
        if request is None or request.path != self.path:
            # A stray request (a favicon, a port scan) is not the redirect: keep waiting.
            _respond(connection, 404, b"not found")
            return None
        if _first(request.query, "state") != expected_state:
            # Not the response to this authorization (a stale tab, another program): keep waiting.
            _respond(connection, 400, b"This response is not for the authorization in progress.")
            return None
        try:
            result = _authorization_result(request.query, expected_state)
        except AuthorizationResponseError as refused:
            _respond(connection, 400, f"Authorization failed: {refused.error}".encode())
            raise
        _respond(connection, 200, _DONE_PAGE)
        return result


def _remaining(deadline: float) -> float:
    """Seconds left before ``deadline``; raises ``TimeoutError`` once it has passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("nobody came back with the authorization response in time")
    return left


def _first(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def _authorization_result(query: dict[str, list[str]], expected_state: str) -> AuthorizationCodeResult:
    """The code of a response whose ``state`` is ``expected_state``."""
    error = _first(query, "error")
    if error is not None:
        raise AuthorizationResponseError(error, _first(query, "error_description") or "")
    code = _first(query, "code")
    if not code:
        raise AuthorizationResponseError("invalid_request", "the response carries no code")
    return AuthorizationCodeResult(code=code, state=expected_state, iss=_first(query, "iss"))


def _read_request(connection: socket.socket) -> _Request | None:
    received = b""
    while b"\r\n\r\n" not in received and len(received) < _MAX_REQUEST_BYTES:
        chunk = connection.recv(4096)
        if not chunk:
            break
        received += chunk
    request_line = received.split(b"\r\n", 1)[0].decode("latin-1")
    parts = request_line.split(" ")
    if len(parts) != 3 or parts[0] != "GET":
        return None
    target = urlsplit(parts[1])
    return _Request(target.path, parse_qs(target.query))


def _respond(connection: socket.socket, status: int, body: bytes) -> None:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
    )
    connection.sendall(head.encode() + body)
