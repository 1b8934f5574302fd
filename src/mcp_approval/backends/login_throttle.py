"""A limit on failed reviewer sign-ins, per client address.

The reviewer console (``POST /console/login``) and the reviewer API (every ``/approvals`` request)
take a bearer token. Without a limit one client could try tokens as fast as the server answers.
:class:`FailedLoginThrottle` remembers each client's recent failures in a sliding window; once a
client has ``max_failures`` of them within ``window_s`` seconds it is refused, without its token
being checked, until the oldest of those failures leaves the window.

One instance is meant to be shared by the console and the reviewer API of one app, so failures on
either count against both::

    throttle = FailedLoginThrottle(clock)
    routes = [*reviewer_routes(backend, authenticate, throttle=throttle),
              *console_routes(backend, authenticate, audit, clock=clock, throttle=throttle)]

Endpoints whose tokens another layer checks (the MCP endpoint, where the SDK answers 401) get the
same limit from the ASGI middleware :class:`FailedAuthenticationLimit`, which counts their 401s.

The client is the peer address of the connection (:func:`client_key`). ``X-Forwarded-For`` is not
trusted: anyone can send it, so honouring it would let a client pick a fresh key per attempt. The
servers let uvicorn replace the peer with the forwarded address only for the proxies configured in
``trusted_proxies``; behind any other proxy every client shares the proxy's address, and its limit.
"""

from __future__ import annotations

import json
from collections import OrderedDict, deque

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_approval.clock import Clock, SystemClock

__all__ = [
    "DEFAULT_MAX_CLIENTS",
    "DEFAULT_MAX_FAILURES",
    "DEFAULT_WINDOW_S",
    "FailedAuthenticationLimit",
    "FailedLoginThrottle",
    "client_key",
]

#: Failed authentications a client may make within the window before it is refused.
DEFAULT_MAX_FAILURES = 10
#: The length of the sliding window, in seconds.
DEFAULT_WINDOW_S = 300
#: The most clients tracked at once; beyond it the client whose last failure is oldest is forgotten.
DEFAULT_MAX_CLIENTS = 10_000


def client_key(request: Request) -> str:
    """The key a request's failures are counted under: its peer address.

    A request without a peer (some test or embedded transports) counts under ``""``, so such
    clients share one limit rather than escaping it.
    """
    return request.client.host if request.client is not None else ""


class FailedLoginThrottle:
    """Counts failed authentications per client key and says when a client must wait.

    Successes are not recorded and do not clear a client's failures: a client holding one valid
    token could otherwise interleave it with guesses to keep guessing for ever. Nor does one
    client's success or failure affect any other client.

    Not thread-safe; meant for one event loop, where no method awaits.
    """

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        max_failures: int = DEFAULT_MAX_FAILURES,
        window_s: int = DEFAULT_WINDOW_S,
        max_clients: int = DEFAULT_MAX_CLIENTS,
    ) -> None:
        """A throttle allowing ``max_failures`` failures per ``window_s`` seconds to each of ``max_clients``.

        Raises:
            ValueError: a limit that is not positive.
        """
        if max_failures < 1 or window_s < 1 or max_clients < 1:
            raise ValueError("max_failures, window_s and max_clients must all be at least 1")
        self._clock = clock or SystemClock()
        self._max_failures = max_failures
        self._window_ms = window_s * 1000
        self._max_clients = max_clients
        # Key -> times of its latest failures (at most max_failures: older ones can never matter again),
        # ordered by each key's latest failure so the first entry is the one to evict.
        self._failures: OrderedDict[str, deque[int]] = OrderedDict()

    def retry_after_s(self, key: str) -> int | None:
        """Whole seconds (at least 1) until ``key`` may try again, or ``None`` if it may try now."""
        failures = self._recent(key)
        if failures is None or len(failures) < self._max_failures:
            return None
        wait_ms = failures[0] + self._window_ms - self._clock.now_ms()
        return max(1, -(-wait_ms // 1000))  # round up: retrying at the advertised time must succeed

    def record_failure(self, key: str) -> None:
        """Count one failed authentication by ``key`` now."""
        failures = self._recent(key)
        if failures is None:
            if len(self._failures) >= self._max_clients:
                self._failures.popitem(last=False)
            failures = self._failures[key] = deque(maxlen=self._max_failures)
        else:
            self._failures.move_to_end(key)
        failures.append(self._clock.now_ms())

    def tracked_clients(self) -> int:
        """How many client keys are held in memory (never more than ``max_clients``)."""
        return len(self._failures)

    def _recent(self, key: str) -> deque[int] | None:
        """``key``'s failures still inside the window, dropping older ones (and the key, if none are left)."""
        failures = self._failures.get(key)
        if failures is None:
            return None
        horizon = self._clock.now_ms() - self._window_ms
        while failures and failures[0] <= horizon:
            failures.popleft()
        if not failures:
            del self._failures[key]
            return None
        return failures


class FailedAuthenticationLimit:
    """ASGI middleware: ``throttle`` applied to the requests under ``path`` whose token ``app`` checks.

    Every ``401`` answered under ``path`` counts as a failure of the client's address; a client over
    the limit is answered ``429`` with ``Retry-After`` before ``app`` (and its token check) runs.
    Other paths pass through untouched.
    """

    def __init__(self, app: ASGIApp, *, throttle: FailedLoginThrottle, path: str = "/mcp") -> None:
        self.app = app
        self.throttle = throttle
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse a throttled client, else pass the request on and count a 401 answer."""
        if scope["type"] != "http" or not _under(scope["path"], self.path):
            await self.app(scope, receive, send)
            return
        client = client_key(Request(scope))
        wait_s = self.throttle.retry_after_s(client)
        if wait_s is not None:
            await _too_many(send, wait_s)
            return

        async def counting(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                self.throttle.record_failure(client)
            await send(message)

        await self.app(scope, receive, counting)


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix.rstrip("/") + "/")


async def _too_many(send: Send, wait_s: int) -> None:
    body = json.dumps(
        {"error": "too_many_requests", "error_description": "too many failed authentications from this address"}
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(wait_s).encode()),
    ]
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": body})
