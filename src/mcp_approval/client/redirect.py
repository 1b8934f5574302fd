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
"""

from __future__ import annotations

import inspect
import socket
import sys
import webbrowser
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from urllib.parse import parse_qs, urlsplit

import anyio.to_thread
from mcp.shared.auth import AuthorizationCodeResult

__all__ = ["AuthorizationResponseError", "BrowserOpener", "LoopbackRedirectReceiver", "open_in_browser"]

BrowserOpener = Callable[[str], Awaitable[None] | None]
"""Shows the user the authorization URL; returns once shown, without waiting for the user."""

_MAX_REQUEST_BYTES = 16_384
_DONE_PAGE = b"<!doctype html><title>Signed in</title><p>Authorization received. You can close this window.</p>"


class AuthorizationResponseError(Exception):
    """The redirect carried an OAuth error, a wrong ``state``, or no ``code``; ``error`` names which."""

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
        timeout_s: how long to wait for the user to come back.
    """

    def __init__(
        self,
        *,
        port: int = 0,
        path: str = "/callback",
        open_browser: BrowserOpener = open_in_browser,
        timeout_s: float = 300.0,
    ) -> None:
        if not path.startswith("/"):
            raise ValueError(f"path {path!r} must start with '/'")
        self.path = path
        self.open_browser = open_browser
        self.timeout_s = timeout_s
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

        Raises:
            AuthorizationResponseError: the response is an error, its ``state`` is not the
                expected one, or it has no ``code``.
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
        self._socket.settimeout(self.timeout_s)
        while True:
            connection, _ = self._socket.accept()
            with connection:
                connection.settimeout(self.timeout_s)
                request = _read_request(connection)
                if request is None or request.path != self.path:
                    # A stray request (a favicon, a port scan) is not the redirect: keep waiting.
                    _respond(connection, 404, b"not found")
                    continue
                try:
                    result = _authorization_result(request.query, expected_state)
                except AuthorizationResponseError as refused:
                    _respond(connection, 400, f"Authorization failed: {refused.error}".encode())
                    raise
                _respond(connection, 200, _DONE_PAGE)
                return result


def _authorization_result(query: dict[str, list[str]], expected_state: str) -> AuthorizationCodeResult:
    def first(name: str) -> str | None:
        values = query.get(name)
        return values[0] if values else None

    if first("state") != expected_state:
        raise AuthorizationResponseError("invalid_state", "the response's state is not the one sent")
    error = first("error")
    if error is not None:
        raise AuthorizationResponseError(error, first("error_description") or "")
    code = first("code")
    if not code:
        raise AuthorizationResponseError("invalid_request", "the response carries no code")
    return AuthorizationCodeResult(code=code, state=expected_state, iss=first("iss"))


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
